"""chatdb serve drafts from the archive: a conversation resent with its last message changed
is guessed from the answer to the earlier version, a request sent again from the answers
before it, and n > 1 answers draft beside each other."""

import pytest

from .conftest import Server

pytestmark = pytest.mark.usefixtures("pinned_draft_costs")   # how much is drafted, not the load

PASSAGE = ("the old lighthouse keeper climbed one hundred and twelve steps every evening, "
           "trimmed the wick, wound the clockwork and wrote the weather in a green book.")
OPENING = [{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "Hi!"}]
COPY = {"role": "user", "content": f"Repeat this exactly: {PASSAGE}"}
EDITED = {"role": "user", "content": f"Repeat this exactly, please: {PASSAGE}"}
TOKENS = 60


def _share(reply: dict, spec: "dict | None" = None) -> float:
    """The share of the answer's tokens that were accepted guesses of the archive."""
    spec = spec or reply["chatdb"]["speculative"]
    return spec["by_drafter"]["archive"]["accepted"] / reply["usage"]["completion_tokens"]


def text(reply: dict, i: int = 0) -> str:
    return reply["choices"][i]["message"]["content"]


def test_a_resent_conversation_and_n_answers_draft_from_what_the_archive_holds(
        start_server, tmp_path):
    server: Server = start_server("--parallel", 2, "--draft", "archive", db=tmp_path / "a.db")
    first = server.chat(OPENING + [COPY], max_tokens=TOKENS, n=2)
    assert text(first, 0) == text(first, 1)
    assert len(first["chatdb"]["speculative_each"]) == 2
    again = server.chat(OPENING + [COPY], max_tokens=TOKENS)   # its question's third answer
    assert text(again) == text(first) and _share(again) >= 0.6
    edited = server.chat(OPENING + [EDITED], max_tokens=TOKENS)   # the last message changed
    assert edited["chatdb"]["reused_messages"] == 2
    assert _share(edited) >= 0.5, edited["chatdb"]["speculative"]
