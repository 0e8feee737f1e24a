"""A hybrid model (recurrent and attention layers): attention rows per message, and the
recurrent state as checkpoints at message ends, kept where a restore is likely.

The model is tiny, with random weights (tests/assets/tiny_hybrid.py): what is
checked is the state llama.cpp holds, which does not depend on what the
weights mean. Answers are compared with answers computed another way.
"""

import pytest

from engine.state import recurrent_layout

from .checkpoint_chats import (ARGS, assert_fork_restores_the_first_stretch, live_states,
                               past_a_stretch, segments)
from .conftest import assert_refused, restored_from_archive, run_chatdb
from .test_gemma import path_tokens

@pytest.fixture
def hybrid_engine(open_engine, hybrid_path):
    def factory(db=None, **kw):
        return open_engine(db, model_path=hybrid_path, n_ctx=4096, **kw)
    return factory


def test_rows_and_one_checkpoint_per_chain_restore_the_live_state(hybrid_engine, db_path):
    archive, engine = hybrid_engine()
    assert engine.kv_mode == "rows+checkpoint" and engine.draft_mode == "off"
    live = live_states(engine, archive.create_conversation("h").id)
    rows = segments(db_path)
    per_token = engine.layout.row_bytes_per_token
    # Every message's attention rows, and only the head's recurrent state: the
    # checkpoints of earlier turns were superseded (same stretch, no branch).
    assert [r[0] for r in rows if r[1] == "rows"] == list(range(1, 9))
    assert all(r[3] == r[2] * per_token for r in rows if r[1] == "rows")
    (head,) = [r for r in rows if r[1] == "snapshot"]
    head_id, head_state = live[-1]
    assert head[0] == head_id
    _, _, recurrent = recurrent_layout.split_hybrid(head_state)
    assert head[3] == len(recurrent)  # a fixed size: not a whole state
    # The state rebuilt from the archive is the one llama.cpp held, byte for byte.
    assert restored_from_archive(engine, archive, head_id) == head_state


def test_resume_in_a_new_process_equals_recompute(tmp_path, hybrid_engine, hybrid_path):
    model = ("--model", str(hybrid_path))
    db = tmp_path / "a.db"
    first, _ = run_chatdb("ask", "--json", *model, *ARGS, "Name a river.", db=db)
    second, _ = run_chatdb("ask", "--json", "-c", *model, *ARGS, "Name a lake.", db=db)
    assert second["kv"]["source"] == "archive"
    assert second["kv"]["restored_tokens"] == path_tokens(db, first["message_id"])
    # `ask -c` decompresses the rows while the model loads, under this mode's fingerprint.
    _, early = hybrid_engine(db, resume=second["message_id"])
    assert len(early.cache.early) == 4
    # The same history read from scratch, without stored KV, answers the same.
    archive, engine = hybrid_engine(tmp_path / "b.db", use_kv=False)
    conv = archive.create_conversation("again")
    assert engine.reply(conv.id, "Name a river.").text == first["text"]
    assert engine.reply(conv.id, "Name a lake.").text == second["text"]


def test_a_fork_restores_from_the_nearest_checkpoint(tmp_path, hybrid_engine, hybrid_path):
    db = tmp_path / "a.db"
    one, two, three, ends = past_a_stretch(db, hybrid_path)
    kept = [r[0] for r in segments(db) if r[1] == "snapshot"]
    # The deepest checkpoint of the first stretch and the head's; every message's rows.
    assert kept == [one["message_id"], three["message_id"]]
    assert len([r for r in segments(db) if r[1] == "rows"]) == 6
    assert_fork_restores_the_first_stretch(db, hybrid_path, one, two, ends,
                                           hybrid_engine(tmp_path / "b.db", use_kv=False))


def test_drafting_is_off_and_refused_when_asked_for(tmp_path, hybrid_path):
    _, proc = run_chatdb("ask", "--model", str(hybrid_path), "--draft", "lookup",
                         "--max-tokens", "4", "Hi", db=tmp_path / "a.db", check=False)
    assert_refused(proc, "recurrent")


def test_doctor_names_the_memory_and_its_storage(tmp_path, hybrid_path):
    doc, _ = run_chatdb("doctor", "--json", "--model", str(hybrid_path), db=tmp_path / "a.db")
    assert doc["kv"]["memory"] == "hybrid" and doc["kv"]["stored_as"] == "rows + checkpoints"
    _, proc = run_chatdb("doctor", "--model", str(hybrid_path), db=tmp_path / "a.db")
    assert "KV state: rows + checkpoints, f16 (attention and recurrent layers (hybrid)" in proc.stdout
