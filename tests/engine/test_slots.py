"""The server's request loop in process: turns batched on one context answer as each alone, store
their KV, and a one-sequence engine (the console's) resumes them from the archive."""

import threading

import pytest

from chatdb.archive import Archive
from engine.chat import Engine
from engine.batching.request_loop import RequestLoop
from engine.batching.turn_request import TurnRequest

from .conftest import GREEDY

QUESTIONS = {"smollm2": ["Name a colour.", "What is tea?"],
             "gemma": ["Name a river.", "What is bread made of?"]}


class Waiter:
    """A turn's callbacks: the text streamed, then its outcome or error."""

    def __init__(self, question: str):
        self.done, self.pieces, self.outcome, self.error = threading.Event(), [], None, None
        self.turn = TurnRequest(messages=[("user", question)], sampling=GREEDY,
                                on_text=self.pieces.append, on_done=self._done,
                                on_error=self._failed)

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
    slots = RequestLoop(open_engine, capacity=2)
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


def test_a_short_request_behind_a_long_prompt_is_answered_while_that_prompt_is_read(model_path,
                                                                                   tmp_path):
    """The step's prompt tokens are shared: a short request that arrives while a long
    prompt is being read gets all it needs at once, and is answered before the long
    prompt's first token (it used to wait behind whole chunks of it)."""
    def open_engine():
        return Engine.open(Archive.open(tmp_path / "served.db"), model_path, n_ctx=2048,
                           draft="off", n_seq=2)
    events, lock = [], threading.Lock()

    def note(what):
        with lock:
            events.append(what)
    slots = RequestLoop(open_engine, capacity=2)
    slots.start()
    long = Waiter("Summarise this. " + "The lighthouse keeper climbed the stairs again. " * 90)
    short = Waiter("Name a colour.")
    short.turn.sampling = GREEDY.with_(max_tokens=4)
    long.turn.on_text = lambda text: note("long text")
    done = short.turn.on_done
    short.turn.on_done = lambda outcome: (note("short done"), done(outcome))
    try:
        assert slots.submit(long.turn) and slots.submit(short.turn)
        for w in (long, short):
            assert w.done.wait(600) and w.error is None, w.error
    finally:
        slots.close()
    assert long.outcome.result.prompt_tokens > 600
    assert events.index("short done") < events.index("long text")
    assert short.outcome.batch["prompt_passes"] == 1   # its whole prompt in the first pass it shared
    assert short.outcome.batch["most_sequences"] == 2


def test_a_turn_joining_running_ones_takes_the_slot_next_to_them(model_path, tmp_path):
    """With a KV stream per sequence, llama.cpp decodes each run of consecutive sequence
    ids in a pass of its own: a turn that joins takes the slot next to those running, even
    when another free slot holds its whole prompt (that one restores from memory instead)."""
    def open_engine():
        return Engine.open(Archive.open(tmp_path / "served.db"), model_path, n_ctx=1024,
                           draft="off", n_seq=3)
    slots = RequestLoop(open_engine, capacity=3)
    slots.start()
    try:
        first = [Waiter(q) for q in ("Name a colour.", "Name a fruit.", "Name a tree.")]
        assert all(slots.submit(w.turn) for w in first)   # one each, slots 0, 1 and 2
        for w in first:
            assert w.done.wait(600) and w.error is None, w.error
        assert [w.outcome.batch["sequence"] for w in first] == [0, 1, 2]
        running = Waiter("Write a long story about a lighthouse.")
        running.turn.sampling = GREEDY.with_(max_tokens=200)
        seen = threading.Event()
        running.turn.on_text = lambda text: seen.set()
        assert slots.submit(running.turn) and seen.wait(600)         # it runs on slot 0
        again = Waiter("Name a tree.")     # what slot 2 holds, resent
        assert slots.submit(again.turn)
        for w in (again, running):
            assert w.done.wait(600) and w.error is None, w.error
    finally:
        slots.close()
    assert running.outcome.batch["sequence"] == 0
    assert again.outcome.batch["sequence"] == 1
    assert again.outcome.result.kv_source != "live" and again.outcome.result.computed_tokens < 16
