"""`chatdb serve` with models whose memory is not plain attention: Gemma 3's
sliding-window layers (batched, two sequences) and the tiny hybrid (recurrent
layers: one sequence, so concurrent requests take turns). Two requests at once
are both answered and stored, and a restarted server restores each conversation
from the archive. Batching is proven by what the server reports.

The hybrid's requests, computed one after the other, get the greedy text each
gets alone. Gemma's batched ones need not: on its CPU kernels (Q5_0/Q8_0/Q4_K
weights) a token computed in a batch with another sequence's differs from the
same token computed alone in the last bits, which can change a greedy choice of
this small model (SmolLM2's Q4_1 kernels compute alike: tests/server/test_concurrency.py).
"""

import pytest

from chatdb.archive import Archive

from .test_concurrency import LONG, Streamed, text, user

QUESTION = "Name a colour."


@pytest.mark.parametrize("model", ["gemma_path", "hybrid_path"])
def test_two_requests_at_once_answer_as_alone_and_resume_after_a_restart(
        request, start_server, tmp_path, model):
    path = request.getfixturevalue(model)
    together_db = tmp_path / "together.db"
    server = start_server("--model", path, "--parallel", 2, db=together_db)
    long = Streamed(server, user(LONG), max_tokens=120)
    assert long.first.wait(600)                # answering: the second request joins (or waits)
    short = server.chat(user(QUESTION), max_tokens=16)
    first = [(LONG, long.result(), long.final["chatdb"]), (QUESTION, text(short), short["chatdb"])]
    # Gemma's sequences are batched; a hybrid's state is one sequence, so requests take turns.
    assert long.final["chatdb"]["batch"]["most_sequences"] == (2 if model == "gemma_path" else 1)
    assert server.stop() == 0

    if model == "hybrid_path":
        alone = start_server("--model", path, "--parallel", 1, db=tmp_path / "alone.db")
        assert [answer for _, answer, _ in first] == [text(alone.chat(user(LONG), max_tokens=120)),
                                                      text(alone.chat(user(QUESTION), max_tokens=16))]
        alone.stop()
    with Archive.open(together_db) as archive:
        assert archive.integrity_check() == "ok"

    again = start_server("--model", path, "--parallel", 2, db=together_db)
    for question, answer, figures in first:
        messages = user(question) + [{"role": "assistant", "content": answer}] + user("Why?")
        follow = again.chat(messages, max_tokens=4)
        assert follow["chatdb"]["conversation_id"] == figures["conversation_id"]
        assert follow["chatdb"]["kv_source"] == "archive"
        cached = follow["usage"]["prompt_tokens_details"]["cached_tokens"]
        assert follow["usage"]["prompt_tokens"] - cached < 16   # only the new question and the opening
