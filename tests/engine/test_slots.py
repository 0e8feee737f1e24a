"""The slot scheduler in process: turns batched on one context answer as each alone, store
their KV, and a one-sequence engine (the console's) resumes them from the archive."""

import threading

import pytest

from chatdb.archive import Archive
from engine.chat import Engine
from engine.slots import SlotScheduler
from engine.turns import Turn

from .conftest import GREEDY

QUESTIONS = {"smollm2": ["Name a colour.", "What is tea?"],
             "gemma": ["Name a river.", "What is bread made of?"]}


class Waiter:
    """A turn's callbacks: the text streamed, then its outcome or error."""

    def __init__(self, question: str):
        self.done, self.pieces, self.outcome, self.error = threading.Event(), [], None, None
        self.turn = Turn(messages=[("user", question)], sampling=GREEDY,
                         on_text=self.pieces.append, on_done=self._done, on_error=self._failed)

    def _done(self, outcome):
        self.outcome = outcome
        self.done.set()

    def _failed(self, exc):
        self.error = exc
        self.done.set()


@pytest.fixture(params=["smollm2", "gemma"])
def which(request, model_path, gemma_path):
    return request.param, model_path if request.param == "smollm2" else gemma_path


def test_batched_turns_answer_as_alone_and_the_console_resumes_them(which, tmp_path):
    name, path = which
    db = tmp_path / "served.db"

    def open_engine():
        return Engine.open(Archive.open(db), path, n_ctx=1024, draft="off", n_seq=2)
    slots = SlotScheduler(open_engine, parallel=2, capacity=2)
    slots.start()
    waiters = [Waiter(q) for q in QUESTIONS[name]]
    try:
        assert all(slots.submit(w.turn) for w in waiters)
        assert not slots.submit(Waiter("One too many.").turn)     # the capacity is taken
        for w in waiters:
            assert w.done.wait(600) and w.error is None, w.error
    finally:
        slots.close()
    assert slots.most_sequences == 2
    results = [w.outcome.result for w in waiters]
    assert [r.text for r in results] == ["".join(w.pieces) for w in waiters]

    with Archive.open(tmp_path / "alone.db") as archive:
        engine = Engine.open(archive, path, n_ctx=1024, sampling=GREEDY)
        try:
            alone = [engine.reply(archive.create_conversation(q).id, q).text
                     for q in QUESTIONS[name]]
        finally:
            engine.close()
    assert [r.text for r in results] == alone

    with Archive.open(db) as archive:
        engine = Engine.open(archive, path, n_ctx=1024, sampling=GREEDY)   # one sequence
        try:
            for r in results:
                follow = engine.reply(r.conversation_id, "Tell me more.")
                assert follow.kv_source == "archive"
                assert follow.restored_tokens >= r.prompt_tokens and follow.computed_tokens < 16
        finally:
            engine.close()
