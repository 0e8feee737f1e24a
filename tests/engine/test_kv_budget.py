"""The KV budget with the real model: chats far larger than it are stored, the file stays
near it, and a chat whose KV was dropped (all or part) answers as a recomputation."""

import os
import shutil
import subprocess
import threading

import pytest

from chatdb.archive import Archive
from chatdb.kv.report import stored
from engine.chat import Engine
from engine.llama.sampling import SamplingSettings

from ..chatdb_command import DRAFT, chatdb_argv, python_path
from ..kv_tree import assert_rows_are_path_prefixes
from ..server.conftest import ROOT, Server
from .conftest import restored_from_archive, run_chatdb

GREEDY = SamplingSettings(temperature=0, max_tokens=8, seed=1)
GREEDY_ARGS = ("--temperature", "0", "--seed", "1", "--max-tokens", "8", "--ctx", "2048")
SYSTEM = "You are a patient teacher who answers in one sentence."
FILLER = "Please think carefully about every part of the question before answering it. "


def _question(topic: str, turn: int) -> str:
    return f"Question {turn} about {topic}: what matters most? " + FILLER * 3


def _file_bytes(db) -> int:
    return sum(f.stat().st_size for f in (db, db.with_name(db.name + "-wal")) if f.exists())


def _path_tokens(archive, message_id: int) -> list[int]:
    """Tokens through each message of the path to `message_id`, as stored."""
    ends, total = [], 0
    for message in archive.path(message_id):
        total += archive.conn.execute("SELECT n_tokens FROM message_tokens WHERE message_id = ?",
                                      (message.id,)).fetchone()[0]
        ends.append(total)
    return ends


def _recomputed(db, conv_id: int, question: str) -> str:
    """The answer an engine that neither restores nor stores KV gives (as --no-kv)."""
    with Archive.open(db) as archive:
        engine = Engine.open(archive, sampling=GREEDY, draft=DRAFT, use_kv=False, n_ctx=2048)
        try:
            return engine.reply(conv_id, question).text
        finally:
            engine.close()


@pytest.fixture(scope="module")
def bounded(tmp_path_factory):
    """An archive whose budget holds about one and a half of its three chats (two turns
    each, a system prompt first), stored in that order; what each store left."""
    root = tmp_path_factory.mktemp("bounded")
    empty = root / "empty.db"
    Archive.open(empty).close()
    db = root / "a.db"
    archive = Archive.open(db)
    engine = Engine.open(archive, sampling=GREEDY, draft=DRAFT, n_ctx=2048)
    seen, notes = [], []
    engine._warn_cb = notes.append
    try:
        chats = []
        for topic in ("rivers", "mountains", "deserts"):
            conv = archive.create_conversation(topic, system_prompt=SYSTEM)
            for turn in (1, 2):
                engine.reply(conv.id, _question(topic, turn))
            engine.flush()
            if not chats:   # the first chat's KV sets the budget: one and a half of it
                with archive.transaction():
                    archive.kv_budget.set(int(stored(archive.conn)[0] * 1.5))
            chats.append(conv.id)
            seen.append((stored(archive.conn)[0], _file_bytes(db)))
        budget = archive.kv_budget.get().bytes
    finally:
        engine.close()
        archive.close()
    return {"db": db, "chats": chats, "budget": budget, "seen": seen,
            "base": _file_bytes(empty), "notes": notes}


def _copy(bounded, tmp_path, name: str = "copy.db"):
    copy = tmp_path / name
    shutil.copy(bounded["db"], copy)
    return copy


def test_the_file_stays_near_the_budget_while_chats_far_larger_are_stored(bounded):
    budget, base = bounded["budget"], bounded["base"]
    with Archive.open(bounded["db"]) as archive:
        total_tokens = archive.conn.execute("SELECT sum(n_tokens) FROM message_tokens").fetchone()[0]
        per_token = stored(archive.conn)[0] / archive.conn.execute(
            "SELECT sum(n_tokens) FROM kv_segments").fetchone()[0]
        assert archive.integrity_check() == "ok"
    assert total_tokens * per_token > 1.8 * budget   # the chats hold far more than it
    for kv, file in bounded["seen"][1:]:
        assert kv <= budget
        assert file <= base + 1.05 * budget   # the empty archive's pages hold the text too
    assert bounded["notes"] == []   # a chat that fits is kept whole, nothing to say


def test_the_latest_chat_restores_from_the_archive_in_a_new_process(bounded, tmp_path):
    db = _copy(bounded, tmp_path)
    latest = bounded["chats"][-1]
    with Archive.open(db) as archive:
        head = archive.conversation(latest).head_id
        whole = _path_tokens(archive, head)[-1]
    answer, _ = run_chatdb("ask", "--json", "--conv", str(latest), *GREEDY_ARGS, "And then?", db=db)
    assert answer["kv"]["source"] == "archive" and answer["kv"]["restored_tokens"] == whole


def test_a_chat_whose_kv_was_dropped_answers_as_a_recomputation_and_is_stored_again(bounded, tmp_path):
    db = _copy(bounded, tmp_path)
    first = bounded["chats"][0]
    with Archive.open(db) as archive:
        head = archive.conversation(first).head_id
        fingerprint = archive.kv.fingerprints_for(archive.conversation(bounded["chats"][-1]).head_id).pop()
        assert archive.kv.deepest_restorable(head, fingerprint) is None   # all of it dropped
        before = _path_tokens(archive, head)[-1]
    expected = _recomputed(_copy(bounded, tmp_path, "recomputed.db"), first, "And then?")
    answer, _ = run_chatdb("ask", "--json", "--conv", str(first), *GREEDY_ARGS, "And then?", db=db)
    assert answer["kv"]["restored_tokens"] == 0 and answer["text"] == expected
    with Archive.open(db) as archive:   # used now: stored again, within the budget
        point = archive.kv.deepest_restorable(answer["message_id"], fingerprint)
        assert point is not None and point.message_id == answer["message_id"]
        assert stored(archive.conn)[0] <= bounded["budget"]
        reopened = archive.conn.execute(
            "SELECT restored_tokens, reusable_tokens FROM kv_reopenings").fetchall()
        assert [tuple(r) for r in reopened] == [(0, before)]   # counted as a reopening the archive missed


def test_partial_kv_restores_its_first_messages_and_computes_the_rest(bounded, tmp_path):
    db = _copy(bounded, tmp_path)
    middle = bounded["chats"][1]
    with Archive.open(db) as archive:
        head = archive.conversation(middle).head_id
        fingerprint = archive.kv.fingerprints_for(archive.path(head)[0].id).pop()
        point = archive.kv.deepest_restorable(head, fingerprint)
        ends = _path_tokens(archive, head)
        ids = [m.id for m in archive.path(head)]
    assert point is not None and point.message_id != head   # some of it kept, not all
    kept = ends[ids.index(point.message_id)]
    expected = _recomputed(_copy(bounded, tmp_path, "recomputed.db"), middle, "And then?")
    answer, _ = run_chatdb("ask", "--json", "--conv", str(middle), *GREEDY_ARGS, "And then?", db=db)
    assert answer["kv"]["source"] == "archive" and answer["kv"]["restored_tokens"] == kept
    assert answer["text"] == expected


def test_a_budget_smaller_than_one_chat_keeps_its_first_messages_and_says_so_once(tmp_path):
    db = tmp_path / "small.db"
    with Archive.open(db) as archive:
        with archive.transaction():
            archive.kv_budget.set(1 << 20)   # about fifty tokens of this model's KV
        notes = []
        engine = Engine.open(archive, sampling=GREEDY, draft=DRAFT, n_ctx=2048, warn=notes.append)
        try:
            conv = archive.create_conversation("small", system_prompt=SYSTEM)
            for turn in (1, 2):
                engine.reply(conv.id, _question("lakes", turn))
                engine.flush()
                assert stored(archive.conn)[0] <= 1 << 20
        finally:
            engine.close()
        budget_notes = [n for n in notes if "KV budget" in n]
        assert len(budget_notes) == 1 and "smaller than this chat" in budget_notes[0]
        head = archive.conversation(conv.id).head_id
        system = archive.path(head)[0].id
        fingerprint = archive.kv.fingerprints_for(system).pop()
        assert archive.kv.deepest_restorable(head, fingerprint).message_id == system


def test_chatdb_serve_and_another_process_on_one_archive_keep_one_budget(tmp_path):
    db = tmp_path / "shared.db"
    with Archive.open(db) as archive:
        with archive.transaction():
            archive.kv_budget.set(3 << 20)   # about one of these chats
    server = Server(db)
    try:
        asks = [subprocess.Popen(chatdb_argv("ask", "--db", db, "--json", *GREEDY_ARGS, _question(t, 1)),
                                 cwd=ROOT, env={**os.environ, "PYTHONPATH": python_path()},
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for t in ("oceans", "forests")]
        answers = []
        clients = [threading.Thread(target=lambda t=t: answers.append(server.chat(
            [{"role": "system", "content": SYSTEM}, {"role": "user", "content": _question(t, 1)}],
            max_tokens=8))) for t in ("glaciers", "volcanoes")]
        for client in clients:
            client.start()
        for client in clients:
            client.join(timeout=300)
        for ask in asks:
            out, err = ask.communicate(timeout=300)
            assert ask.returncode == 0, err
        assert len(answers) == 2
    finally:
        assert server.stop() == 0
    with Archive.open(db) as archive:
        assert archive.integrity_check() == "ok"
        assert stored(archive.conn)[0] <= 3 << 20
        assert archive.count_conversations() == 4 and archive.count_messages() >= 4 * 2
        assert_rows_are_path_prefixes(archive)
        kept = _most_kept(archive)
    copy = tmp_path / "copy.db"
    shutil.copy(db, copy)
    expected = _recomputed(copy, kept, "And then?")
    with Archive.open(db) as archive:   # what the archive kept restores as computing it would
        engine = Engine.open(archive, sampling=GREEDY, draft=DRAFT, n_ctx=2048)
        try:
            resumed = engine.reply(kept, "And then?")
        finally:
            engine.close()
    assert resumed.kv_source == "archive" and resumed.restored_tokens > 0
    assert resumed.text == expected


def _most_kept(archive) -> int:
    """The conversation whose path keeps the most KV restorable. Which one
    that is depends on the order the four turns' writers stored in, the last one making room
    for itself, not on which conversation was created last."""
    def kept(conv_id: int) -> int:
        head = archive.conversation(conv_id).head_id
        fingerprints = archive.kv.fingerprints_for(archive.path(head)[0].id)
        deepest = fingerprints and archive.kv.deepest_restorable(head, fingerprints.pop())
        return deepest.depth if deepest else 0
    conv_id = max((c.id for c in archive.list_conversations()), key=kept)
    assert kept(conv_id) > 0   # a budget of about one chat keeps (most of) one
    return conv_id


def _drop_everything_elsewhere(db) -> None:
    """Another connection (another process's writer) drops all KV, as a budget of 0 would."""
    with Archive.open(db) as other:
        with other.transaction():
            other.kv_budget.set(0)
            other.kv_keeping.make_room(0)
        assert stored(other.conn)[0] == 0


def test_a_restore_under_way_finishes_with_what_it_began_while_another_process_drops(open_engine, db_path):
    archive, engine = open_engine(n_ctx=2048)
    conv = archive.create_conversation("race", system_prompt=SYSTEM)
    answer = engine.reply(conv.id, _question("tides", 1))
    engine.flush()
    live = bytes(engine.model.get_state())
    reads, get = [], archive.kv.get

    def get_then_drop(*args):   # the first segment read, then the drop commits elsewhere
        if not reads:
            _drop_everything_elsewhere(db_path)
        reads.append(args[0])
        return get(*args)

    archive.kv.get = get_then_drop
    restored = restored_from_archive(engine, archive, answer.message_id)
    assert len(reads) == 3 and restored == live   # every segment read, from the snapshot begun
    archive.kv.get = get
    assert stored(archive.conn)[0] == 0           # and the drop did happen


def test_kv_dropped_between_the_offer_and_the_read_is_offered_again_not_called_damaged(open_engine, db_path):
    archive, engine = open_engine(n_ctx=2048)
    conv = archive.create_conversation("race", system_prompt=SYSTEM)
    engine.reply(conv.id, _question("tides", 1))
    engine.flush()
    head = archive.conversation(conv.id).head_id
    system = archive.path(head)[0].id
    load = engine.cache.stored.load

    def drop_then_load(seq, request, message_id, n_tokens):   # as a drop elsewhere would, meanwhile
        with Archive.open(db_path) as other:
            with other.transaction():
                for m in archive.path(head)[1:]:
                    other.kv.delete(m.id, engine.fingerprint)
        engine.cache.stored.load = load
        return load(seq, request, message_id, n_tokens)

    engine.cache.stored.load = drop_then_load
    engine.cache.reset()
    engine.cache.memory.entries.clear()
    result = engine.reply(conv.id, "And then?")
    assert result.kv_source == "archive" and not any("damaged" in w for w in result.warnings)
    assert result.restored_tokens == _path_tokens(archive, system)[-1]   # the system prompt's, kept


def test_rows_whose_parent_another_process_dropped_meanwhile_are_not_stored(open_engine, db_path, monkeypatch):
    """The writer stores a path's rows one message a transaction; another process may drop
    the rows above between two of them. What would sit below that hole is left out."""
    from engine.kv import row_sharing
    archive, engine = open_engine(n_ctx=2048)
    conv = archive.create_conversation("race", system_prompt=SYSTEM)
    system = archive.messages(conv.id)[0].id
    plan, planned = row_sharing.plan_sharing, []

    def drop_the_system_prompts_then_plan(archive_, fingerprint, layout, message_id, *rest):
        planned.append(message_id)
        if len(planned) == 2:   # the system prompt's rows are stored: drop them elsewhere
            with Archive.open(db_path) as other:
                with other.transaction():
                    assert other.kv.has(system, fingerprint)
                    other.kv.delete(system, fingerprint)
        return plan(archive_, fingerprint, layout, message_id, *rest)

    monkeypatch.setattr(row_sharing, "plan_sharing", drop_the_system_prompts_then_plan)
    answer = engine.reply(conv.id, _question("tides", 1))
    engine.flush()
    assert planned[0] == system and len(planned) >= 2   # the drop came between two stores
    assert_rows_are_path_prefixes(archive)
    assert not archive.kv.fingerprints_for(answer.message_id)
