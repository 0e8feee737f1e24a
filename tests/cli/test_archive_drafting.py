"""Every front-end drafts from the archive, in real processes: the console's /retry and
/edit and `-c` repeats, and `chatdb ask` asking again in a new conversation."""

import re

import pytest

from chatdb.archive import Archive

pytestmark = pytest.mark.usefixtures("pinned_draft_costs")   # how much is drafted, not the load

QUESTION = "List ten fruits, one per line, each with its colour."
PASSAGE = ("the old lighthouse keeper climbed one hundred and twelve steps every evening, "
           "trimmed the wick, wound the clockwork and wrote the weather in a green book.")
COPY, EDITED = f"Repeat this exactly: {PASSAGE}", f"Repeat this exactly, please: {PASSAGE}"
GREEDY = ("--max-tokens", "80", "--temperature", "0", "--ctx", "2048", "--draft", "archive")
DRAFTED = re.compile(r"^(\d+) tokens .*· (\d+) of \d+ drafted tokens accepted", re.M)


def _accepted(stderr: str) -> list[float]:
    """The share of each turn's tokens that were accepted guesses, as the console's turn
    lines say, for each turn that drafted."""
    return [int(m[2]) / int(m[1]) for m in DRAFTED.finditer(stderr)]


def test_console_retry_edit_and_a_repeated_question_draft_from_earlier_answers(chatdb, db_path):
    result = chatdb(*GREEDY, input=f"{COPY}\n/retry\n/edit 1 {EDITED}\n/model\n")
    assert result.returncode == 0, result.stderr
    assert "archive draft index: 2 answers" in result.stdout + result.stderr   # before the edit
    with Archive.open(db_path) as archive:
        conv = archive.latest_conversation()
        answers = [m for m in archive.tree(conv.id) if m.role == "assistant"]
    assert len(answers) == 3 and answers[0].content == answers[1].content   # greedy retry
    accepted = _accepted(result.stderr)
    assert len(accepted) == 2 and min(accepted) >= 0.6, result.stderr   # the retry, the edit
    repeat = chatdb("-c", *GREEDY, input=f"{COPY}\n")
    assert repeat.returncode == 0, repeat.stderr
    assert _accepted(repeat.stderr) and _accepted(repeat.stderr)[0] >= 0.6, repeat.stderr


def test_ask_in_a_new_conversation_drafts_from_the_same_question_asked_before(chatdb):
    first = chatdb("ask", *GREEDY, "--json", QUESTION).json()
    again = chatdb("ask", *GREEDY, "--json", QUESTION).json()
    assert again["conversation_id"] != first["conversation_id"]
    assert again["text"] == first["text"]
    by = again["speculative"]["by_drafter"]["archive"]
    assert by["accepted"] >= again["usage"]["completion_tokens"] // 2
