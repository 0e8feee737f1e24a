"""Generation: cancel keeps the partial answer, long prompts, UTF-8 streaming, kill -9."""

import codecs
import os
import signal
import subprocess
import time

import pytest

from chatdb.archive import Archive
from engine.errors import PromptTooLong
from engine.batching.job import Job
from engine.decode.modes import DraftMode
from engine.llama.sampling import SamplingSettings

from ..chatdb_command import chatdb_argv, python_path
from .conftest import ROOT


def test_cancel_keeps_partial_answer_as_context(open_engine):
    archive, engine = open_engine(sampling=SamplingSettings(temperature=0, max_tokens=200))
    conv = archive.create_conversation("c")
    streamed = []
    result = engine.reply(conv.id, "Write a long story about a dragon.",
                          on_text=streamed.append, cancelled=lambda: len(streamed) >= 5)
    assert result.status == "interrupted" and result.finish == "cancelled"
    assert result.text == "".join(streamed) and result.text
    stored = archive.message(result.message_id)
    assert stored.status == "interrupted" and stored.content == result.text
    assert archive.conversation(conv.id).head_id == result.message_id
    # The partial answer is context for the next turn, straight from the live KV.
    nxt = engine.reply(conv.id, "Go on.")
    assert nxt.status == "complete"
    assert archive.message(nxt.message_id).parent_id == nxt.user_message_id
    assert archive.message(nxt.user_message_id).parent_id == result.message_id
    assert nxt.kv_source == "live" and nxt.computed_tokens < 20


def test_message_longer_than_context_is_refused_and_nothing_written(open_engine):
    archive, engine = open_engine(n_ctx=512)
    conv = archive.create_conversation("long")
    before = archive.count_messages()
    with pytest.raises(PromptTooLong, match="does not fit the context of 512"):
        engine.reply(conv.id, "word " * 2000)
    assert archive.count_messages() == before


def test_a_last_message_that_is_no_question_and_too_long_is_refused_before_decoding(open_engine):
    """An answer (or a tool's result) at the end of the path is kept whatever the window
    leaves out; one longer than the context was sent to llama_decode, which failed."""
    archive, engine = open_engine(n_ctx=512)
    conv = archive.create_conversation("long")
    asked = archive.add_message(conv.id, "user", "Say a lot.")
    said = archive.add_message(conv.id, "assistant", "word " * 2000, parent_id=asked.id)
    before = archive.count_messages()
    with pytest.raises(PromptTooLong, match=r"last message \(assistant\).*context of 512"):
        engine.answer(conv.id, said.id)
    assert archive.count_messages() == before
    # What the console shows of a chat still reads its window (a question stored too long
    # for this context, as after a smaller --ctx, is refused only when answered).
    long_question = archive.add_message(conv.id, "user", "word " * 2000, parent_id=said.id)
    assert engine.window_of(long_question.id) == (2, long_question.id)
    with pytest.raises(PromptTooLong):
        engine.answer(conv.id, long_question.id)
    # The engine goes on: a question that fits is answered.
    assert engine.reply(conv.id, "Hi.").status == "complete"


def test_long_conversation_leaves_out_oldest_turns(open_engine):
    archive, engine = open_engine(n_ctx=512, sampling=SamplingSettings(temperature=0, max_tokens=16))
    conv = archive.create_conversation("long", system_prompt="You are brief.")
    for i in range(8):
        archive.add_message(conv.id, "user", f"Question {i}: " + "tell me more about clouds " * 8)
        archive.add_message(conv.id, "assistant", "Clouds are water. " * 8)
    result = engine.reply(conv.id, "Summarise.")
    assert result.left_out_messages > 0
    assert result.prompt_tokens + 16 <= 512
    assert any("left out" in w for w in result.warnings)
    assert archive.message(result.message_id).content == result.text
    # The system prompt stayed in the window.
    system = engine.prompts.path_tokens(archive.messages(conv.id)[:1]).flat().tolist()
    assert engine.cache.live[:len(system)].tolist() == system
    # A turn's warnings are its own: a short conversation next has none.
    short = archive.create_conversation("short")
    assert engine.reply(short.id, "Hi.").warnings == []


class ScriptedSampler:
    """Chooses the given tokens in order: drives the real model's pieces through the slot."""

    last = None     # no log-probabilities asked for

    def __init__(self, tokens):
        self.tokens = list(tokens)

    def sample(self, ctx, index=-1):
        return self.tokens.pop(0)

    def close(self):
        pass


class ScriptedJob(Job):
    """A completion whose tokens are chosen, not sampled."""

    def __init__(self, prompt, tokens, **kw):
        super().__init__(prompt, SamplingSettings(temperature=0, max_tokens=100), **kw)
        self.script = tokens

    def sampler(self, model):
        return ScriptedSampler(self.script)


def test_streaming_keeps_multibyte_characters_whole(open_engine):
    archive, engine = open_engine()
    text = "Grüße, 日本語のテキスト 😀🎉 ok"
    tokens = engine.model.tokenize(text, special=False)
    pieces = [engine.model.piece(t) for t in tokens]
    assert any(_incomplete_utf8(p) for p in pieces), "test text must split a character"
    eos = engine.model.tokenize("<|im_end|>")[0]
    streamed = []
    job = ScriptedJob(_np(engine.model.tokenize("<|im_start|>assistant\n")), tokens + [eos],
                      on_text=streamed.append, draft=DraftMode.OFF)
    out = engine.scheduler.run(job)
    assert "".join(streamed) == text == out.text
    assert all("\ufffd" not in chunk for chunk in streamed)


def _np(tokens):
    import numpy as np
    return np.asarray(tokens, np.int32)


def _incomplete_utf8(piece: bytes) -> bool:
    try:
        codecs.decode(piece, "utf-8")
    except UnicodeDecodeError:
        return True
    return False


def test_kill_9_during_generation_keeps_archive_consistent(tmp_path):
    db = tmp_path / "k.db"
    env = {**os.environ, "PYTHONPATH": python_path()}
    proc = subprocess.Popen(
        chatdb_argv("--db", db, "ask", "--temperature", "0", "--max-tokens", "2000",
                    "Write a very long essay about the history of ships."),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    got = b""
    deadline = time.time() + 120
    while len(got) < 40 and time.time() < deadline:
        got += os.read(proc.stdout.fileno(), 64)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert len(got) >= 40, proc.stderr.read()
    with Archive.open(db) as archive:
        assert archive.integrity_check() == "ok"
        assert archive.conn.execute("PRAGMA foreign_key_check").fetchall() == []
        conv = archive.latest_conversation()
        path = archive.messages(conv.id)
        killed = path[-1]
        assert killed.role == "user" and "history of ships" in killed.content
    # The conversation continues; the unanswered question stays, and the next
    # one is its sibling (a question is never chained under another question).
    from .conftest import run_chatdb
    result, _ = run_chatdb("ask", "--json", "-c", "--temperature", "0", "--max-tokens", "8",
                           "Short version please.", db=db)
    with Archive.open(db) as archive:
        user = archive.message(result["user_message_id"])
        assert archive.message(killed.id).content == killed.content
        assert user.parent_id == killed.parent_id and user.id != killed.id


def test_seed_makes_sampling_repeatable(open_engine):
    archive, engine = open_engine()
    def answer(seed, **kw):
        conv = archive.create_conversation("s")
        settings = SamplingSettings(temperature=1.0, seed=seed, max_tokens=20, **kw)
        return engine.reply(conv.id, "Invent a name for a cat.", sampling=settings).text
    assert answer(7) == answer(7)
    assert len({answer(seed) for seed in (1, 2, 3, 4)}) > 1
    # Every sampler of the chain is accepted and changes nothing about repeatability.
    tight = dict(top_k=5, top_p=0.8, min_p=0.1, repeat_penalty=1.3)
    assert answer(9, **tight) == answer(9, **tight)
