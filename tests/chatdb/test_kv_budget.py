"""The KV budget on a real archive file: sizes, the running totals, and what is dropped first."""

import os
import shutil

import pytest

from chatdb.archive import Archive
from chatdb.errors import ChatdbError
from chatdb.kv import eviction
from chatdb.kv.budget import DEFAULT_CAP, ENV, default_budget, parse_size
from chatdb.kv.report import report, stored

from ..kv_tree import assert_rows_are_path_prefixes

FP = "fp"
SIZE = 4096   # bytes of each segment (random: they do not compress)


def _chat(archive, n: int, fp: str = FP, parent=None, tokens: int = 10, size: int = SIZE):
    """A conversation of `n` messages with rows stored (under `parent`, a fork); their ids."""
    conv = archive.create_conversation("c", head_id=parent)
    ids = []
    for i in range(n):
        message = archive.add_message(conv.id, "user" if i % 2 == 0 else "assistant", f"m{i}")
        archive.kv.put(message.id, fp, "rows", tokens, os.urandom(size))
        ids.append(message.id)
    return conv, ids


def _used(archive, message_id: int, second: int, fp: str = FP) -> None:
    with archive.transaction():
        archive.kv_keeping.record_use(fp, message_id, f"2024-01-01T00:00:{second:02d}.000Z")


def _rows(archive, ids, fp=FP) -> list[bool]:
    return [archive.kv.has(m, fp) for m in ids]


def _true_total(archive) -> int:
    return archive.conn.execute(
        "SELECT coalesce(sum(length(data)), 0) FROM (SELECT data FROM kv_segments "
        "UNION ALL SELECT data FROM kv_shared_rows)").fetchone()[0]


@pytest.mark.parametrize("text, expected", [
    ("500MB", 500 * 10**6), ("4GiB", 4 << 30), ("0", 0), ("unlimited", None), ("Unlimited", None),
    ("1.5G", int(1.5 * 2**30)), ("12 kb", 12_000), ("512m", 512 << 20), ("100", 100), ("2TB", 2 * 10**12),
])
def test_sizes_as_people_write_them(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "-1", "5XB", "1e9", "MB", "4 GiB extra", "1..5G"])
def test_a_bad_size_is_one_line_saying_what_a_size_is(text):
    with pytest.raises(ChatdbError) as caught:
        parse_size(text)
    message = str(caught.value)
    assert "\n" not in message and "500MB" in message and "unlimited" in message


def test_the_default_is_bounded_and_smaller_on_a_small_disk(tmp_path, archive):
    disk = shutil.disk_usage(tmp_path).total
    assert default_budget(tmp_path / "a.db") == min(DEFAULT_CAP, disk // 10)
    budget = archive.kv_budget.get()
    assert budget.source == "default" and budget.bytes == min(DEFAULT_CAP, disk // 10)
    assert "4 GiB" in budget.describe() and "tenth of the disk" in budget.describe()


def test_the_budget_is_stored_in_the_archive_and_the_environment_overrides_it(db_path, archive, monkeypatch):
    with archive.transaction():
        archive.kv_budget.set(123_000)
    with Archive.open(db_path) as other:   # another process's connection sees it
        assert (other.kv_budget.get().bytes, other.kv_budget.get().source) == (123_000, "archive")
    monkeypatch.setenv(ENV, "1GiB")
    assert (archive.kv_budget.get().bytes, archive.kv_budget.get().source) == (1 << 30, ENV)
    monkeypatch.setenv(ENV, "lots")
    with pytest.raises(ChatdbError, match=ENV):
        archive.kv_budget.get()
    monkeypatch.delenv(ENV)
    with archive.transaction():
        archive.kv_budget.set(None)
    assert archive.kv_budget.get().bytes is None


def test_the_running_totals_stay_true_through_every_kind_of_write(archive):
    conv, ids = _chat(archive, 4)
    archive.kv.put(ids[0], FP, "rows", 10, os.urandom(2 * SIZE))          # rewritten (upsert)
    archive.kv.put(ids[1], FP, "snapshot", 20, os.urandom(SIZE))
    from chatdb.kv.store import encode
    shared_id, _ = archive.kv.put_shared(FP, "d" * 64, 3, encode(os.urandom(SIZE)))
    segment = archive.kv.get(ids[2], FP)
    assert archive.kv.share(ids[2], FP, shared_id, encode(os.urandom(SIZE // 2)), segment.checksum)
    assert stored(archive.conn) == (_true_total(archive), 6)
    archive.kv.delete(ids[2], FP)                  # releases the shared run with it
    assert stored(archive.conn) == (_true_total(archive), 4)
    archive.delete_conversation(conv.id)           # cascades through messages
    assert stored(archive.conn) == (0, 0) == (_true_total(archive), 0)


def test_rows_go_from_the_end_of_the_least_recently_used_path_back(archive):
    old_conv, old = _chat(archive, 6)
    new_conv, new = _chat(archive, 6)
    _used(archive, old[-1], 1)
    _used(archive, new[-1], 2)
    with archive.transaction():
        archive.kv_budget.set(_true_total(archive) - 2 * SIZE)   # two segments too many
        room = archive.kv_keeping.make_room(0)
    assert room.dropped == 2 and room.left >= 0
    assert _rows(archive, old) == [True] * 4 + [False] * 2   # the old chat keeps its first messages
    assert _rows(archive, new) == [True] * 6
    assert archive.kv.deepest_restorable(old[-1], FP).message_id == old[3]


def test_the_rows_forks_share_count_once_with_the_worth_of_every_chat_using_them(archive):
    # A chat whose first three messages two branches share, and a linear chat used between.
    _, trunk = _chat(archive, 3)
    _, first = _chat(archive, 1, parent=trunk[-1])
    _, linear = _chat(archive, 4)
    _, second = _chat(archive, 1, parent=trunk[-1])
    _used(archive, first[0], 1)
    _used(archive, linear[-1], 2)
    _used(archive, second[0], 3)
    order = eviction.plan(archive.conn, 10 * SIZE)
    dropped = [v.message_id for v in order]
    # The least recent branch's own message first; then the linear chat from its end back
    # before the trunk, which serves the most recent chat and the oldest one.
    assert dropped[0] == first[0]
    assert dropped[1:5] == linear[::-1]
    assert dropped.index(trunk[-1]) > dropped.index(linear[0])


def test_deeper_rows_are_worth_more_at_the_same_recency(archive):
    # Two chats used at the same moment: the long one's last rows cost more to compute again.
    _, short = _chat(archive, 2, tokens=10)
    _, long = _chat(archive, 2, tokens=3000)
    for ids in (short, long):
        with archive.transaction():
            archive.kv_keeping.record_use(FP, ids[-1], "2024-01-01T00:00:00.000Z")
    # Ranks still differ (a tie goes by message), so weigh them apart by position only:
    # with per-byte worth equal, the short chat's shallow rows go first.
    order = eviction.plan(archive.conn, SIZE, span=100)
    assert order[0].message_id == short[-1]


def test_what_is_protected_stays_even_when_the_rest_cannot_make_room(archive):
    _, ids = _chat(archive, 4)
    _, other = _chat(archive, 2)
    with archive.transaction():
        archive.kv_budget.set(SIZE)
        room = archive.kv_keeping.make_room(SIZE, protect=set(ids))
    assert not room.fits(SIZE) and room.dropped == 2
    assert _rows(archive, ids) == [True] * 4 and _rows(archive, other) == [False] * 2


def test_snapshots_between_heads_and_branch_points_go_first(archive):
    conv = archive.create_conversation("s")
    ids = []
    for i in range(5):
        ids.append(archive.add_message(conv.id, "user" if i % 2 == 0 else "assistant", f"m{i}").id)
        archive.kv.put(ids[-1], FP, "snapshot", 10 * (i + 1), os.urandom(SIZE))
    _used(archive, ids[-1], 9)   # recent; yet its interior checkpoints go before its head
    _, other = _chat(archive, 1, fp="another model")
    _used(archive, other[0], 1, fp="another model")
    dropped = [v.message_id for v in eviction.plan(archive.conn, 4 * SIZE)]
    assert sorted(dropped[:4]) == ids[:4]


def test_a_hybrids_rows_past_its_last_checkpoint_go_with_nothing_to_restore(archive):
    conv, ids = _chat(archive, 4)
    archive.kv.put(ids[1], FP, "snapshot", 20, os.urandom(SIZE))   # a checkpoint at the 2nd message
    _used(archive, ids[-1], 5)
    _, other = _chat(archive, 2)
    archive.kv.put(other[-1], FP, "snapshot", 20, os.urandom(SIZE))
    _used(archive, other[-1], 1)   # older, but what it holds restores
    dropped = [(v.message_id, v.kind) for v in eviction.plan(archive.conn, 2 * SIZE)]
    # The rows after the checkpoint restore nothing (the recurrent state is only there).
    assert dropped == [(ids[3], "rows"), (ids[2], "rows")]
    # Then the checkpoint goes with the rows it ends, before the rows above it.
    dropped = [(v.message_id, v.kind) for v in eviction.plan(archive.conn, 7 * SIZE)]
    assert dropped.index((ids[1], "snapshot")) == dropped.index((ids[1], "rows")) + 1


def test_dropping_the_last_segment_naming_a_shared_run_frees_it(archive):
    from chatdb.kv.store import encode
    _, trunk = _chat(archive, 1)
    _, a = _chat(archive, 1, parent=trunk[0])
    _, b = _chat(archive, 1, parent=trunk[0])
    shared_id, _ = archive.kv.put_shared(FP, "e" * 64, 3, encode(os.urandom(SIZE)))
    for m in a + b:
        assert archive.kv.share(m, FP, shared_id, encode(os.urandom(SIZE // 2)),
                                archive.kv.get(m, FP).checksum)
    _used(archive, a[0], 1)
    _used(archive, b[0], 2)
    with archive.transaction():
        archive.kv_budget.set(0)
        archive.kv_keeping.make_room(0)
    assert stored(archive.conn) == (0, 0)


def test_prune_applies_the_budget_now_and_the_report_says_what_is_left(archive):
    _, ids = _chat(archive, 6)
    _used(archive, ids[-1], 1)
    blob = _true_total(archive) // 6     # each segment's stored bytes
    with archive.transaction():
        archive.kv_budget.set(3 * blob)
    pruned = archive.kv_keeping.prune()
    assert pruned.dropped == 3 and pruned.freed_bytes == 3 * blob
    figures = report(archive, archive.kv_budget.get())
    assert figures.stored_bytes == 3 * blob <= figures.budget_bytes
    assert figures.conversations[0]["kv_bytes"] == 3 * blob and figures.conversations[0]["tokens"] == 30
    assert figures.file_bytes >= figures.stored_bytes


def test_an_archive_made_before_is_converted_once_to_give_space_back_and_says_so_once(db_path):
    with Archive.open(db_path) as archive:
        _chat(archive, 3)
        archive.conn.execute("PRAGMA auto_vacuum = NONE")
        archive.conn.execute("VACUUM")   # as archives were made before
        assert archive.conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    with Archive.open(db_path) as archive:
        assert len(archive.notes) == 1 and "converted once" in archive.notes[0]
        assert archive.conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
        assert archive.integrity_check() == "ok" and stored(archive.conn)[1] == 3
    with Archive.open(db_path) as archive:
        assert archive.notes == []


# A writer that stores chats under a budget until killed: every store makes room first.
WRITER = """
import os, sys
from chatdb.archive import Archive
archive = Archive.open(sys.argv[1])
size, turn = int(sys.argv[2]), 0
while True:
    conv = archive.create_conversation("w")
    ids = [archive.add_message(conv.id, "user", f"m{i}").id for i in range(4)]
    for i, message_id in enumerate(ids):
        with archive.transaction():
            if i and not archive.kv.has(ids[i - 1], "fp", "rows"):
                break   # the other writer dropped the rows above: as the engine's writer does
            archive.kv_keeping.make_room(size, protect=set(ids))
            archive.kv.put(message_id, "fp", "rows", 7, os.urandom(size))
    with archive.transaction():
        archive.kv_keeping.record_use("fp", ids[-1])
    turn += 1
    print(turn, flush=True)
"""


def test_two_writers_keep_one_budget_and_a_kill_during_a_drop_loses_nothing(db_path, assert_sound):
    import subprocess
    import sys

    from ..chatdb_command import REPO, python_path
    size = 32 << 10
    with Archive.open(db_path) as archive:
        with archive.transaction():
            archive.kv_budget.set(12 * size)
    env = {**os.environ, "PYTHONPATH": python_path()}
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(db_path), str(size)], cwd=REPO,
                                env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        for writer in writers:   # each has stored (and dropped) a dozen chats
            for _ in range(12):
                assert writer.stdout.readline(), "the writer stopped"
        writers[0].kill()        # kill -9, most likely inside a drop's transaction
        writers[0].wait(timeout=60)
        for _ in range(3):       # the other goes on, on the archive the kill left
            assert writers[1].stdout.readline(), "the writer stopped"
    finally:
        for writer in writers:
            writer.kill()
            writer.wait(timeout=60)
    with Archive.open(db_path) as archive:
        assert_sound(archive.conn)
        kv, blobs = stored(archive.conn)
        assert (kv, blobs) == (_true_total(archive), archive.conn.execute(
            "SELECT count(*) FROM kv_segments").fetchone()[0])
        assert kv <= 12 * size + 2 * (size + 64)    # at most the stores in flight past it
        assert_rows_are_path_prefixes(archive)
        messages = archive.conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        assert messages >= 4 * 27   # nothing but KV was dropped


def test_a_windows_rows_go_from_its_end_back_to_its_anchor_and_root(archive):
    # A window's KV: the system prompt, then the messages from an anchor deep in the path
    # (the ones between are left out of it, and hold no rows under its key).
    window = "fp/window:anchor"
    conv = archive.create_conversation("long", system_prompt="sys")
    path = [archive.messages(conv.id)[0].id]
    for i in range(7):
        path.append(archive.add_message(conv.id, "user" if i % 2 == 0 else "assistant", f"m{i}").id)
    kept = [path[0]] + path[4:]
    for message_id in kept:
        archive.kv.put(message_id, window, "rows", 10, os.urandom(SIZE))
    _used(archive, path[-1], 1, fp=window)
    dropped = [v.message_id for v in eviction.plan(archive.conn, len(kept) * SIZE)]
    assert dropped == kept[::-1]   # the end first, the system prompt last
