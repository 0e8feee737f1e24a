"""Resuming from the archive: same answers as an uninterrupted process, less compute."""

import shutil
import threading

import numpy as np
import pytest

from chatdb.archive import Archive

from .conftest import run_chatdb

FIRST = "Name three colours of the rainbow."
SECOND = "Now name two more."
GREEDY_ARGS = ("--temperature", "0", "--seed", "1", "--max-tokens", "24")


def stored_tokens_through(db, message_id) -> int:
    """Tokens of the path to `message_id`, as the archive stored them."""
    with Archive.open(db) as archive:
        ids = [m.id for m in archive.path(message_id)]
        marks = ",".join("?" * len(ids))
        return archive.conn.execute(
            f"SELECT sum(n_tokens) FROM message_tokens WHERE message_id IN ({marks})", ids
        ).fetchone()[0]


@pytest.fixture(scope="module")
def first_turn(tmp_path_factory):
    """(an archive after one answered turn, its `ask --json` document), made once for the
    module and only read: each test works on its own copy (copy_of)."""
    db = tmp_path_factory.mktemp("first-turn") / "a.db"
    first, _ = run_chatdb("ask", "--json", *GREEDY_ARGS, FIRST, db=db)
    return db, first


@pytest.fixture(scope="module")
def recomputed_second(first_turn, tmp_path_factory):
    """The answer to SECOND after the first turn with no KV restored (on a copy): what every
    fallback from stored KV must still answer."""
    db = tmp_path_factory.mktemp("recomputed") / "a.db"
    shutil.copy(first_turn[0], db)
    result, _ = run_chatdb("ask", "--json", "-c", "--no-kv", *GREEDY_ARGS, SECOND, db=db)
    return result["text"]


def copy_of(first_turn, to):
    """A copy of the first-turn archive of this test's own."""
    shutil.copy(first_turn[0], to)
    return to


def test_resume_in_new_process_equals_uninterrupted(tmp_path, open_engine, first_turn):
    # Uninterrupted: both turns in one process.
    archive, engine = open_engine(tmp_path / "one.db")
    conv = archive.create_conversation("x")
    engine.reply(conv.id, FIRST)
    expected = engine.reply(conv.id, SECOND)

    # Interrupted: one process per turn, the second resumes from the archive.
    db, first = copy_of(first_turn, tmp_path / "two.db"), first_turn[1]
    second, _ = run_chatdb("ask", "--json", "-c", *GREEDY_ARGS, SECOND, db=db)
    assert second["conversation_id"] == first["conversation_id"]
    assert second["text"] == expected.text
    assert second["kv"]["source"] == "archive"
    restored = second["kv"]["restored_tokens"]
    assert restored == stored_tokens_through(db, first["message_id"])
    assert second["kv"]["computed_tokens"] == second["usage"]["prompt_tokens"] - restored

    with Archive.open(db) as archive2:
        answer = archive2.message(second["message_id"])
        assert answer.status == "complete"
        assert [m.id for m in archive2.messages(second["conversation_id"])][-1] == answer.id
        tokens = archive2.tokens.get(answer.id, engine.tokenizer)
    assert np.array_equal(tokens, archive.tokens.get(expected.message_id, engine.tokenizer))


def test_fork_from_old_message_restores_shared_prefix(db_path, first_turn):
    copy_of(first_turn, db_path)
    first = first_turn[1]
    run_chatdb("ask", "--json", "-c", *GREEDY_ARGS, SECOND, db=db_path)
    fork, _ = run_chatdb("ask", "--json", "--fork-from", str(first["message_id"]), *GREEDY_ARGS,
                         "And one more?", db=db_path)
    assert fork["conversation_id"] != first["conversation_id"]
    assert fork["kv"]["source"] == "archive"
    # Everything up to and including the first answer came from the archive.
    assert fork["kv"]["restored_tokens"] == stored_tokens_through(db_path, first["message_id"])


def test_ten_forks_store_the_shared_prefix_once(open_engine):
    archive, engine = open_engine()
    conv = archive.create_conversation("base")
    base = engine.reply(conv.id, "Tell me about the sea. " * 20)
    engine.flush()
    shared = [m.id for m in archive.path(base.message_id)]
    before = archive.kv.usage(engine.fingerprint)
    for i in range(10):
        fork = archive.fork(base.message_id)
        result = engine.reply(fork.id, f"Question {i}?")
        assert result.restored_tokens > 0
    engine.flush()
    counts = archive.conn.execute(
        "SELECT message_id, count(*) FROM kv_segments GROUP BY message_id").fetchall()
    per_message = dict(counts)
    assert all(per_message[m] == 1 for m in shared)
    after = archive.kv.usage(engine.fingerprint)
    # Ten forks added only the KV rows of their own two messages each, and the
    # ten questions (siblings) the leading rows they have alike once, in one run.
    runs = archive.conn.execute("SELECT id, n_tokens FROM kv_shared_rows").fetchall()
    assert len(runs) == 1 and runs[0]["n_tokens"] >= 1
    named = archive.conn.execute("SELECT count(*) FROM kv_segments WHERE shared_id = ?",
                                 (runs[0]["id"],)).fetchone()[0]
    assert named == 10
    assert after.segments == before.segments + 20 + 1
    own_tokens = archive.conn.execute(
        "SELECT sum(n_tokens) FROM kv_segments WHERE message_id NOT IN (%s)"
        % ",".join("?" * len(shared)), shared).fetchone()[0]
    distinct_tokens = own_tokens - (named - 1) * runs[0]["n_tokens"]
    assert after.raw_bytes - before.raw_bytes == distinct_tokens * engine.layout.bytes_per_token


def test_corrupt_segment_is_reported_and_recomputed(tmp_path, first_turn, recomputed_second):
    db = copy_of(first_turn, tmp_path / "a.db")
    with Archive.open(db) as archive:
        archive.conn.execute("UPDATE kv_segments SET data = substr(data, 1, length(data) / 2) "
                             "WHERE message_id = (SELECT min(message_id) FROM kv_segments)")
    damaged, proc = run_chatdb("ask", "--json", "-c", *GREEDY_ARGS, SECOND, db=db)
    assert "damaged" in proc.stderr and proc.stderr.count("\n") == 1
    assert damaged["kv"]["restored_tokens"] == 0
    assert damaged["text"] == recomputed_second
    # The recomputed rows replaced the damaged ones: the next turn restores again.
    third, _ = run_chatdb("ask", "--json", "-c", *GREEDY_ARGS, "Thanks!", db=db)
    assert third["kv"]["source"] == "archive"


def test_a_segment_of_the_wrong_kind_is_never_handed_to_llama_cpp(tmp_path, first_turn,
                                                                  recomputed_second):
    db = copy_of(first_turn, tmp_path / "a.db")
    with Archive.open(db) as archive:  # the answer's rows, labelled a whole-state snapshot
        archive.conn.execute("UPDATE kv_segments SET kind = 'snapshot' "
                             "WHERE message_id = (SELECT max(message_id) FROM kv_segments)")
    result, proc = run_chatdb("ask", "--json", "-c", *GREEDY_ARGS, SECOND, db=db)
    # A rows engine offers only rows: the mislabelled segment is never read,
    # so llama.cpp prints nothing, and what it held is recomputed.
    assert proc.stderr == ""
    assert result["text"] == recomputed_second


def test_other_fingerprint_is_not_restored(tmp_path, first_turn, recomputed_second):
    db = copy_of(first_turn, tmp_path / "a.db")
    with Archive.open(db) as archive:
        archive.conn.execute("UPDATE kv_segments SET fingerprint = 'another-model'")
    result, proc = run_chatdb("ask", "--json", "-c", *GREEDY_ARGS, SECOND, db=db)
    assert "another model" in proc.stderr
    assert result["kv"]["restored_tokens"] == 0
    assert result["text"] == recomputed_second


def test_no_kv_neither_reads_nor_writes(tmp_path):
    db = tmp_path / "a.db"
    run_chatdb("ask", "--json", "--no-kv", *GREEDY_ARGS, FIRST, db=db)
    with Archive.open(db) as archive:
        assert archive.kv.usage().segments == 0
    run_chatdb("ask", "--json", *GREEDY_ARGS, FIRST, db=db)
    result, _ = run_chatdb("ask", "--json", "-c", "--no-kv", *GREEDY_ARGS, SECOND, db=db)
    assert result["kv"]["restored_tokens"] == 0 and result["kv"]["source"] == "none"


def test_switching_conversations_reuses_memory(open_engine):
    archive, engine = open_engine()
    a = archive.create_conversation("a")
    b = archive.create_conversation("b")
    engine.reply(a.id, "Long question about rivers. " * 12)
    engine.reply(b.id, "Another question about mountains. " * 12)
    back = engine.reply(a.id, "And lakes?")
    assert back.kv_source == "memory"
    assert back.restored_tokens > 100
    assert back.computed_tokens < back.restored_tokens  # only the new question is read


def test_snapshot_mode_resumes_from_whole_states(tmp_path, open_engine):
    """The fallback for models whose KV cannot be cut into rows."""
    archive, engine = open_engine(tmp_path / "one.db", kv_mode="snapshot")
    assert engine.kv_mode == "snapshot"
    conv = archive.create_conversation("s")
    first = engine.reply(conv.id, FIRST)
    engine.flush()
    assert archive.kv.has(first.message_id, engine.fingerprint, "snapshot")
    expected = engine.reply(conv.id, SECOND)
    engine.flush()
    kinds = {k for (k,) in archive.conn.execute("SELECT DISTINCT kind FROM kv_segments")}
    assert kinds == {"snapshot"}
    # The head's snapshot superseded the first answer's (neither a head, a
    # branch point nor a checkpoint any more), in the same transaction.
    assert archive.kv.usage().segments == 1
    assert not archive.kv.has(first.message_id, engine.fingerprint, "snapshot")

    # A new engine (nothing in memory) resumes the head from its snapshot...
    archive2, fresh = open_engine(tmp_path / "one.db", kv_mode="snapshot")
    result = fresh.reply(archive2.fork(expected.message_id).id, "Thanks.")
    assert result.kv_source == "archive"
    assert result.restored_tokens == sum(
        len(archive2.tokens.get(m.id, fresh.tokenizer)) for m in archive2.path(expected.message_id))
    # ...and an earlier point from the nearest snapshot above it: none, so it recomputes.
    again = fresh.reply(archive2.fork(first.message_id).id, SECOND)
    assert again.text == expected.text


def test_prepare_restores_ahead_and_answers_the_same(tmp_path, open_engine, first_turn):
    db, clean = copy_of(first_turn, tmp_path / "a.db"), copy_of(first_turn, tmp_path / "clean.db")
    archive, engine = open_engine(db)
    conv_id = archive.list_conversations()[0].id
    engine.prepare(conv_id)
    ahead = engine.reply(conv_id, SECOND)
    assert ahead.kv_source == "archive" and ahead.restored_ahead
    assert ahead.restored_tokens == stored_tokens_through(db, archive.path(ahead.user_message_id)[-2].id)
    # Only the new message (and the answer's opening) was computed in the turn.
    user_tokens = len(archive.tokens.get(ahead.user_message_id, engine.tokenizer))
    assert user_tokens < ahead.computed_tokens < user_tokens + 8

    clean_archive, fresh = open_engine(clean)
    plain = fresh.reply(conv_id, SECOND)
    assert not plain.restored_ahead and plain.kv_source == "archive"
    assert ahead.text == plain.text


def test_prepare_with_a_damaged_segment_warns_on_the_turn(tmp_path, open_engine,
                                                          first_turn, recomputed_second):
    db = copy_of(first_turn, tmp_path / "a.db")
    with Archive.open(db) as archive:
        archive.conn.execute("UPDATE kv_segments SET data = substr(data, 1, length(data) / 2) "
                             "WHERE message_id = (SELECT min(message_id) FROM kv_segments)")
    warned = []
    archive, engine = open_engine(db, warn=warned.append)
    conv_id = archive.list_conversations()[0].id
    engine.prepare(conv_id)
    result = engine.reply(conv_id, SECOND)
    assert len(warned) == 1 and "damaged" in warned[0]
    assert result.restored_tokens == 0 and not result.restored_ahead
    assert result.text == recomputed_second


def test_segments_read_while_the_model_loads_are_used_once(tmp_path, open_engine,
                                                           first_turn, recomputed_second):
    db = copy_of(first_turn, tmp_path / "a.db")
    with Archive.open(db) as archive:
        head = archive.latest_conversation().head_id
    archive, engine = open_engine(db, resume=head)
    assert len(engine.cache.early) == 2   # the first question and its answer, decoded already
    conv_id = archive.latest_conversation().id
    result = engine.reply(conv_id, SECOND)
    assert result.kv_source == "archive" and not engine.cache.early
    assert result.text == recomputed_second


def test_a_damaged_segment_read_early_is_reported_and_recomputed(tmp_path, open_engine,
                                                                 first_turn, recomputed_second):
    db = copy_of(first_turn, tmp_path / "a.db")
    with Archive.open(db) as archive:
        archive.conn.execute("UPDATE kv_segments SET data = substr(data, 1, length(data) / 2) "
                             "WHERE message_id = (SELECT max(message_id) FROM kv_segments)")
        head = archive.latest_conversation().head_id
    warned = []
    archive, engine = open_engine(db, warn=warned.append, resume=head)
    result = engine.reply(archive.latest_conversation().id, SECOND)
    assert len(warned) == 1 and "damaged" in warned[0] and result.restored_tokens == 0
    assert result.text == recomputed_second


@pytest.mark.timeout(600)  # a close that waited forever on the restore would hang here
def test_switching_again_before_a_restore_ends_answers_the_last_one(tmp_path, open_engine,
                                                                    first_turn):
    db = copy_of(first_turn, tmp_path / "a.db")
    before = set(threading.enumerate())
    archive, engine = open_engine(db)
    first = archive.latest_conversation()
    other = archive.create_conversation("other")
    archive.add_message(other.id, "user", "Say one word.")
    engine.prepare(first.id)
    engine.prepare(other.id)          # waits for the first restore, then starts the next
    engine.prepare(first.id)
    result = engine.reply(first.id, SECOND)
    assert result.kv_source == "archive" and result.restored_ahead
    engine.prepare(other.id)
    engine.close()                    # waits for the restore in flight; nothing hangs
    # Nothing of this engine runs on: not the restore, not the KV writer (the
    # decoder pool is the process's, and stays).
    left = [t.name for t in threading.enumerate() if t not in before and t.is_alive()
            and not t.name.startswith("chatdb-kv-decode")]
    assert left == []
    assert archive.integrity_check() == "ok"


def test_a_damaged_segment_falls_back_to_the_live_prefix(tmp_path, open_engine):
    db = tmp_path / "a.db"
    archive, engine = open_engine(db)
    conv = archive.create_conversation("c")
    first = engine.reply(conv.id, FIRST)
    second = engine.reply(conv.id, SECOND)
    engine.close()
    # A fresh engine answers a fork of the first answer: its context then shares
    # only that much with the conversation, whose KV the archive holds in full.
    warned = []
    archive, engine = open_engine(db, warn=warned.append)
    engine.reply(archive.fork(first.message_id).id, "And one more?")
    archive.conn.execute("UPDATE kv_segments SET data = substr(data, 1, length(data) / 2) "
                         "WHERE message_id = ?", (second.message_id,))
    result = engine.reply(conv.id, "Thanks!")
    assert len(warned) == 1 and "damaged" in warned[0]
    assert result.kv_source == "live"
    shared = stored_tokens_through(db, first.message_id)
    assert shared <= result.restored_tokens < stored_tokens_through(db, second.message_id)
    assert result.computed_tokens == result.prompt_tokens - result.restored_tokens
    # The same answer as computing it all; the damaged segment was replaced.
    _, plain = open_engine(db, use_kv=False)
    assert result.text == plain.reply(archive.fork(second.message_id).id, "Thanks!").text
    engine.flush()
    assert archive.kv.get(second.message_id, engine.fingerprint).decode()
