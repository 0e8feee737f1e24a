"""Siblings keep the leading KV rows they hold alike once (engine/kv/row_sharing.py).

Questions asked from the same point begin with the same template tokens at
the same positions after the same state, so their first rows are the same
bytes: stored once, in a shared run, with each question's segment holding
the rest. Checked on both real models (plain attention, and Gemma's
sliding-window layers): what is restored is byte for byte what llama.cpp
held live, deleting a sibling keeps the others whole, and a damaged run is
recomputed.
"""

import shutil

import numpy as np
import pytest

from chatdb.archive import Archive
from chatdb.tokens import unpack

from .conftest import restored_from_archive, run_chatdb

GREEDY_ARGS = ("--temperature", "0", "--seed", "1", "--max-tokens", "24")
FIRST = "Tell me about the sea."


@pytest.fixture(params=["smollm2", "gemma"])
def engine_of_each_model(request, open_engine):
    path = request.getfixturevalue("model_path" if request.param == "smollm2" else "gemma_path")
    return open_engine(model_path=path, n_ctx=2048)


def forks_of_one_answer(archive, engine, n: int) -> dict:
    """n forks from one answer, each asked a question; {fork conversation: (answer, live state)}."""
    head = engine.reply(archive.create_conversation("base").id, FIRST).message_id
    forks = {}
    for i in range(n):
        fork = archive.fork(head)
        result = engine.reply(fork.id, f"Fork {i}: one word?")
        forks[fork.id] = (result.message_id, bytes(engine.model.get_state()))
    engine.flush()
    return forks


def common_tokens(archive, message_ids) -> int:
    arrays = [unpack(archive.conn.execute("SELECT tokens FROM message_tokens WHERE message_id = ?",
                                          (m,)).fetchone()[0]) for m in message_ids]
    n = min(len(a) for a in arrays)
    same = np.all([a[:n] == arrays[0][:n] for a in arrays], axis=0)
    return int(np.argmin(same)) if not same.all() else n


def whole_rows(layout, n_tokens: int) -> int:
    """Raw bytes of a short message's rows (every layer's, the sliding-window ones included)."""
    return n_tokens * layout.bytes_per_token


def test_sibling_questions_share_their_leading_rows_and_restore_the_live_state(engine_of_each_model):
    archive, engine = engine_of_each_model
    forks = forks_of_one_answer(archive, engine, 3)
    questions = [archive.message(answer).parent_id for answer, _ in forks.values()]
    runs = archive.conn.execute("SELECT id, n_tokens, raw_size FROM kv_shared_rows").fetchall()
    assert len(runs) == 1
    run = runs[0]
    # Never more than the tokens the questions begin with alike (the template's
    # opening and "Fork"): rows are compared, and differ once the tokens do.
    assert 1 <= run["n_tokens"] <= common_tokens(archive, questions)
    assert run["raw_size"] == whole_rows(engine.layout, run["n_tokens"])
    named = archive.conn.execute("SELECT message_id, n_tokens, raw_size FROM kv_segments "
                                 "WHERE shared_id = ? ORDER BY message_id", (run["id"],)).fetchall()
    assert [r["message_id"] for r in named] == sorted(questions)
    for r in named:   # each holds only the rows after the run
        assert r["raw_size"] + run["raw_size"] == whole_rows(engine.layout, r["n_tokens"])
    for answer, state in forks.values():
        assert restored_from_archive(engine, archive, answer) == state


def test_deleting_siblings_keeps_the_others_whole_and_leaves_no_run_behind(open_engine):
    archive, engine = open_engine()
    forks = forks_of_one_answer(archive, engine, 3)
    first, *others = forks
    # The first fork's question was rewritten to begin with the run when the
    # second was stored: deleting it must not take the run from the others.
    archive.delete_conversation(first)
    assert archive.conn.execute("SELECT count(*) FROM kv_shared_rows").fetchone()[0] == 1
    assert archive.conn.execute("SELECT count(*) FROM kv_segments WHERE shared_id IS NOT NULL"
                                ).fetchone()[0] == 2
    for conv in others:
        answer, state = forks[conv]
        assert restored_from_archive(engine, archive, answer) == state
    for conv in others:
        archive.delete_conversation(conv)
    assert archive.conn.execute("SELECT count(*) FROM kv_shared_rows").fetchone()[0] == 0
    assert archive.conn.execute("PRAGMA foreign_key_check").fetchall() == []


def test_a_damaged_shared_run_is_deleted_with_its_segments_and_recomputed(tmp_path):
    db = tmp_path / "a.db"
    first, _ = run_chatdb("ask", "--json", *GREEDY_ARGS, FIRST, db=db)
    forks = [run_chatdb("ask", "--json", "--fork-from", str(first["message_id"]), *GREEDY_ARGS,
                        f"Fork {i}: one word?", db=db)[0] for i in range(2)]
    clean = tmp_path / "clean.db"
    shutil.copy(db, clean)
    with Archive.open(db) as archive:
        (run,) = archive.conn.execute("SELECT id FROM kv_shared_rows").fetchone()
        assert archive.conn.execute("SELECT count(*) FROM kv_segments WHERE shared_id = ?",
                                    (run,)).fetchone()[0] == 2
        archive.conn.execute("UPDATE kv_shared_rows SET data = substr(data, 1, length(data) / 2)")
    conv = str(forks[1]["conversation_id"])
    damaged, proc = run_chatdb("ask", "--json", "--conv", conv, *GREEDY_ARGS, "And then?", db=db)
    assert "damaged" in proc.stderr and proc.stderr.count("\n") == 1
    # The run went with both questions that began with it (the other fork's
    # too); this turn computed the path, as for any damaged segment.
    with Archive.open(db) as archive:
        ids = [m.id for m in archive.path(first["message_id"])]
        through_first = archive.conn.execute(
            "SELECT sum(n_tokens) FROM message_tokens WHERE message_id IN (%s)" % ",".join("?" * len(ids)),
            ids).fetchone()[0]
        assert archive.conn.execute("SELECT count(*) FROM kv_shared_rows WHERE id = ?", (run,)).fetchone()[0] == 0
        has_rows = "SELECT count(*) FROM kv_segments WHERE message_id = ?"
        assert archive.conn.execute(has_rows, (forks[0]["user_message_id"],)).fetchone()[0] == 0
        assert archive.conn.execute(has_rows, (forks[1]["user_message_id"],)).fetchone()[0] == 1
        assert archive.conn.execute("PRAGMA foreign_key_check").fetchall() == []
    assert damaged["kv"]["restored_tokens"] == 0
    baseline, _ = run_chatdb("ask", "--json", "--conv", conv, "--no-kv", *GREEDY_ARGS, "And then?", db=clean)
    assert damaged["text"] == baseline["text"]
    # The recomputed rows were stored again: the next turn restores them.
    again, _ = run_chatdb("ask", "--json", "--conv", conv, *GREEDY_ARGS, "Thanks!", db=db)
    assert again["kv"]["restored_tokens"] > through_first
