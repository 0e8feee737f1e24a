"""Stopping a turn while its prompt is read: within a batch, nothing empty stored, exact after."""

import pytest

from engine.errors import Cancelled

from .conftest import GREEDY, StopAfter

LONG = "The history of the lighthouse keepers on the northern coast. " * 60   # ~700 tokens


def test_a_stop_during_the_prefill_takes_effect_inside_the_batch(open_engine, tmp_path, capfd):
    archive, engine = open_engine(n_ctx=2048)
    conv = archive.create_conversation("long")
    stop = StopAfter(50)
    with pytest.raises(Cancelled) as raised:
        engine.reply(conv.id, LONG, cancelled=stop)
    assert raised.value.done == 0            # one batch of 512 and more: stopped inside the first
    assert 50 < stop.asked < 1000            # asked per node, not once per batch
    assert capfd.readouterr().err == ""      # llama.cpp's lines about the abort are not shown
    path = archive.messages(conv.id)
    assert [m.role for m in path] == ["user"] and path[0].content == LONG   # no empty answer
    resumed = engine.answer(conv.id, path[0].id)   # the kept question, answered after all
    fresh_archive, fresh = open_engine(tmp_path / "fresh.db", n_ctx=2048)
    expected = fresh.reply(fresh_archive.create_conversation("long").id, LONG)
    assert resumed.text == expected.text


def test_a_stop_before_the_first_token_stores_no_answer(open_engine):
    archive, engine = open_engine(n_ctx=2048, sampling=GREEDY)
    conv = archive.create_conversation("short")
    with pytest.raises(Cancelled):
        engine.reply(conv.id, "Hello", cancelled=lambda: True)
    assert [m.role for m in archive.messages(conv.id)] == ["user"]
