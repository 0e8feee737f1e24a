"""Whole-state snapshots stay bounded: heads, branch points and periodic checkpoints only.

The writer is given opaque state bytes (a snapshot is stored as it is) on a
real archive; what is kept depends only on the tree and the token counts.
"""

from engine.kv.writer import KVWriter, StoreJob, superseded_by

FP = "fp-test"
STATE = memoryview(bytes(range(256)) * 64)   # 16 KiB stands in for a state


def _chain(archive, conv, n):
    ids = []
    for i in range(n):
        ids.append(archive.add_message(conv.id, "user" if i % 2 == 0 else "assistant", f"m{i}").id)
    return ids


def _store(writer, ids, per_message, every):
    ranges = [(m, i * per_message, (i + 1) * per_message) for i, m in enumerate(ids)]
    writer.submit(StoreJob(STATE, FP, ranges, "snapshot", 1, checkpoint_tokens=every))
    writer.flush()


def _snapshots(archive):
    return {r[0] for r in archive.conn.execute(
        "SELECT message_id FROM kv_segments WHERE kind = 'snapshot' AND fingerprint = ?", (FP,))}


def test_the_deepest_snapshot_of_each_stretch_stays():
    ranges = [(1, 0, 900), (2, 900, 1100), (3, 1100, 1900), (4, 1900, 2200), (5, 2200, 2300)]
    # Stretches of 1000 tokens: 1 alone in [0, 1000); 3 deeper than 2 in [1000, 2000);
    # 4 shares the new snapshot's (5) stretch.
    assert superseded_by(ranges, [1, 2, 3, 4], 1000) == [2, 4]


def test_superseded_snapshots_go_heads_branch_points_and_checkpoints_stay(archive, db_path):
    conv = archive.create_conversation("c")
    ids = _chain(archive, conv, 12)
    writer = KVWriter(db_path)
    try:
        for k in range(2, 13, 2):  # one turn at a time: a snapshot at each answer
            _store(writer, ids[:k], 100, every=500)
        # The head, and the deepest answer of each earlier 500-token stretch.
        assert _snapshots(archive) == {ids[3], ids[7], ids[11]}  # ends 400, 800; the head 1200

        # A fork at an answer makes it a head: a later store keeps it.
        fork = archive.fork(ids[7])
        reply = archive.add_message(fork.id, "user", "other").id
        _store(writer, ids[:8] + [reply], 100, every=10_000)
        assert ids[7] in _snapshots(archive) and reply in _snapshots(archive)
        # Continuing the first conversation: ids[11] stops being a head but
        # ids[7] is now a branch point (two children), so both rules keep it.
        more = archive.add_message(conv.id, "user", "more").id
        _store(writer, ids + [more], 100, every=10_000)
        assert ids[11] not in _snapshots(archive) and ids[7] in _snapshots(archive)
    finally:
        writer.close()
    # Storage: a small multiple of one state, however long the chain grew.
    assert archive.kv.usage(FP).raw_bytes <= 5 * STATE.nbytes
