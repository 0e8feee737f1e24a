"""Token arrays and KV segments in the archive, on synthetic data."""

import struct

import numpy as np
import pytest

from chatdb.kv.store import CorruptKV
from chatdb.kv.codec import decode, encode

TOK = "smollm2/chatml"
FP = "model-a/ctx8192/f16/flash"
OTHER_FP = "model-b/ctx8192/f16/flash"


@pytest.fixture
def chain(archive):
    """A conversation of six messages, root first."""
    conv = archive.create_conversation("c", system_prompt="sys")
    for n in range(5):
        archive.add_message(conv.id, "user" if n % 2 == 0 else "assistant", f"m{n}")
    return archive.messages(conv.id)


def kv_bytes(seed: int, n_tokens: int = 4, row: int = 64) -> bytes:
    """Like KV rows: fp16 values of modest size."""
    rng = np.random.default_rng(seed)
    return rng.normal(0, 1, n_tokens * row).astype(np.float16).tobytes()


# -- tokens -------------------------------------------------------------------------


@pytest.mark.parametrize("tokens", [
    [1, 2, 3],
    np.array([0, 49151, 17], dtype=np.int32),
    np.array([5, 6], dtype=np.int64),
    np.array([7, 8], dtype=np.uint16),
    [2**31 - 1, -2**31, -1, 0],
    [],
    np.array([], dtype=np.int32),
])
def test_tokens_round_trip(archive, chain, tokens):
    m = chain[1]
    archive.tokens.put(m.id, TOK, tokens)
    got = archive.tokens.get(m.id, TOK)
    assert got is not None and got.dtype == np.int32
    assert got.tolist() == list(np.asarray(tokens).tolist())
    stored = archive.conn.execute(
        "SELECT n_tokens, tokens FROM message_tokens WHERE message_id = ?", (m.id,)).fetchone()
    assert stored[0] == len(got)
    assert stored[1] == struct.pack(f"<{len(got)}i", *got.tolist())  # int32 little-endian


def test_hundred_thousand_tokens(archive, chain):
    tokens = np.random.default_rng(3).integers(0, 49152, 100_000, dtype=np.int64)
    archive.tokens.put(chain[2].id, TOK, tokens)
    got = archive.tokens.get(chain[2].id, TOK)
    assert got.shape == (100_000,) and np.array_equal(got, tokens)
    assert archive.conn.execute(
        "SELECT n_tokens, length(tokens) FROM message_tokens").fetchone()[:] == (100_000, 400_000)


@pytest.mark.parametrize("bad", [
    np.array([2**31], dtype=np.int64),
    np.array([-2**31 - 1], dtype=np.int64),
    np.array([2**32 - 1], dtype=np.uint32),
    [2**40],
    [1.5, 2.0],
    np.array([True]),
])
def test_tokens_that_do_not_fit_int32_are_refused(archive, chain, bad):
    with pytest.raises((ValueError, OverflowError)):
        archive.tokens.put(chain[1].id, TOK, bad)
    assert archive.tokens.get(chain[1].id, TOK) is None


def test_tokens_per_tokenizer_and_replace(archive, chain):
    m = chain[1].id
    archive.tokens.put(m, TOK, [1, 2])
    archive.tokens.put(m, "other/template", [9])
    archive.tokens.put(m, TOK, [3, 4, 5])
    assert archive.tokens.get(m, TOK).tolist() == [3, 4, 5]
    assert archive.tokens.get(m, "other/template").tolist() == [9]
    assert archive.tokens.get(m, "missing") is None
    assert archive.tokens.get(chain[2].id, TOK) is None


def test_tokens_along_path_with_missing_arrays(archive, chain):
    stored = {chain[0].id: [1, 2, 3], chain[1].id: [4], chain[3].id: [], chain[5].id: [7, 8]}
    for mid, toks in reversed(list(stored.items())):
        archive.tokens.put(mid, TOK, toks)
    archive.tokens.put(chain[2].id, "other/template", [99])
    along = archive.tokens.along_path(chain[5].id, TOK)
    assert [mid for mid, _ in along] == [m.id for m in chain]
    got = {mid: (None if arr is None else arr.tolist()) for mid, arr in along}
    assert got == {m.id: stored.get(m.id) for m in chain}
    assert got[chain[3].id] == []  # stored empty is not missing
    assert [mid for mid, _ in archive.tokens.along_path(chain[2].id, TOK)] == [
        m.id for m in chain[:3]]
    assert all(arr is None for _, arr in archive.tokens.along_path(chain[5].id, "nobody"))
    assert archive.tokens.along_path(424242, TOK) == []


# -- KV codec and store -------------------------------------------------------------


@pytest.mark.parametrize("raw, plane_width, codec", [
    (kv_bytes(1), 2, "zstd+planes2"),
    (kv_bytes(2), 1, "zstd"),
    (kv_bytes(3)[:-1], 2, "zstd"),  # odd length: no planes
    (kv_bytes(4), 4, "zstd+planes4"),
    (b"", 2, "zstd+planes2"),
    (b"x", 2, "zstd"),
])
def test_kv_store_and_read_back(archive, chain, raw, plane_width, codec):
    m = chain[1].id
    stored = archive.kv.put(m, FP, "rows", 4, raw, plane_width=plane_width)
    seg = archive.kv.get(m, FP)
    assert (seg.message_id, seg.kind, seg.n_tokens, seg.codec, seg.raw_size) == (
        m, "rows", 4, codec, len(raw))
    assert stored == len(seg.data)
    assert seg.decode() == raw
    assert archive.kv.has(m, FP) and not archive.kv.has(m, FP, "snapshot")
    assert not archive.kv.has(m, OTHER_FP)


def test_kv_accepts_buffers(archive, chain):
    array = np.random.default_rng(5).normal(size=(3, 32)).astype(np.float16)
    archive.kv.put(chain[1].id, FP, "rows", 3, array)
    archive.kv.put(chain[2].id, FP, "rows", 3, bytearray(array.tobytes()))
    archive.kv.put(chain[3].id, FP, "rows", 3, memoryview(array.tobytes()))
    for m in chain[1:4]:
        assert archive.kv.get(m.id, FP).decode() == array.tobytes()


def test_byte_planes_compress_fp16_better(archive, chain):
    # Large enough for zstd to give each plane blocks (and entropy tables) of its own.
    raw = kv_bytes(6, n_tokens=4096)
    planes = archive.kv.put(chain[1].id, FP, "rows", 4096, raw, plane_width=2)
    plain = archive.kv.put(chain[2].id, FP, "rows", 4096, raw, plane_width=1)
    assert planes < 0.95 * plain < len(raw)


def test_put_replaces_and_delete_removes(archive, chain):
    m = chain[1].id
    archive.kv.put(m, FP, "rows", 4, kv_bytes(1))
    archive.kv.put(m, FP, "rows", 5, kv_bytes(2, n_tokens=5))
    assert archive.kv.get(m, FP).n_tokens == 5
    assert archive.kv.get(m, FP).decode() == kv_bytes(2, n_tokens=5)
    archive.kv.put(m, FP, "snapshot", 9, b"state")
    archive.kv.delete(m, FP)
    assert archive.kv.get(m, FP) is None and archive.kv.get(m, FP, "snapshot").decode() == b"state"
    with pytest.raises(ValueError):
        archive.kv.put(m, FP, "everything", 1, b"x")


def corrupt(archive, message_id, **columns):
    sets = ", ".join(f"{c} = ?" for c in columns)
    archive.conn.execute(f"UPDATE kv_segments SET {sets} WHERE message_id = ?",
                         (*columns.values(), message_id))


@pytest.mark.parametrize("plane_width", [1, 2])
def test_corruption_is_detected(archive, chain, plane_width):
    raw = kv_bytes(7, n_tokens=16)
    m = chain[1].id
    archive.kv.put(m, FP, "rows", 16, raw, plane_width=plane_width)
    good = archive.kv.get(m, FP)

    corrupt(archive, m, checksum="crc32:00000000")
    with pytest.raises(CorruptKV, match="checksum"):
        archive.kv.get(m, FP).decode()

    corrupt(archive, m, checksum=good.checksum, data=good.data[: len(good.data) // 2])
    with pytest.raises(CorruptKV):
        archive.kv.get(m, FP).decode()

    # Re-encoding different bytes under the old checksum: decodes, but not to what was stored.
    other = bytearray(raw)
    other[100] ^= 0x40
    corrupt(archive, m, data=encode(bytes(other), plane_width)[1])
    with pytest.raises(CorruptKV, match="checksum"):
        archive.kv.get(m, FP).decode()

    corrupt(archive, m, data=good.data, raw_size=len(raw) - 2)
    with pytest.raises(CorruptKV):
        archive.kv.get(m, FP).decode()

    corrupt(archive, m, raw_size=len(raw), data=b"not zstd at all")
    with pytest.raises(CorruptKV):
        archive.kv.get(m, FP).decode()

    for codec in ("lz4", "zstd+planes0", "zstd+planes3", "zstd+planesX", "zstd+planes1"):
        corrupt(archive, m, data=good.data, codec=codec)
        with pytest.raises(CorruptKV):
            archive.kv.get(m, FP).decode()

    # A flipped bit inside the frame: zstd's own content checksum catches it.
    flipped = bytearray(good.data)
    flipped[len(flipped) // 2] ^= 0x01
    corrupt(archive, m, data=bytes(flipped), codec=good.codec)
    with pytest.raises(CorruptKV):
        archive.kv.get(m, FP).decode()

    corrupt(archive, m, data=good.data)
    assert archive.kv.get(m, FP).decode() == raw


def test_segments_stored_with_a_crc32_still_decode(archive, chain):
    import zlib
    raw = kv_bytes(9, n_tokens=4)
    codec, blob, _ = encode(raw)
    crc = f"crc32:{zlib.crc32(raw):08x}"
    assert decode(codec, blob, len(raw), crc) == raw
    with pytest.raises(CorruptKV, match="checksum"):
        decode(codec, blob, len(raw), "crc32:00000000")
    with pytest.raises(CorruptKV, match="checksum"):
        decode(codec, blob, len(raw), "md5:0")


def test_the_codec_and_size_are_covered_by_the_checksum():
    raw = kv_bytes(8, n_tokens=6)   # a size that 2, 3 and 4 planes all divide
    codec, blob, checksum = encode(raw)
    assert len(raw) % 12 == 0
    for other in ("zstd+planes3", "zstd+planes4", "zstd"):
        with pytest.raises(CorruptKV, match="does not match its checksum"):
            decode(other, blob, len(raw), checksum)
    with pytest.raises(CorruptKV, match="does not match its checksum"):
        decode(codec, blob, len(raw) + 12, checksum)
    # Segments stored before the codec was covered still decode.
    assert decode(codec, blob, len(raw), "zstd-xxh64:" + blob[-4:].hex()) == raw


def test_codec_functions_directly():
    raw = kv_bytes(8)
    codec, blob, checksum = encode(raw)
    assert codec == "zstd+planes2" and checksum.startswith("zstd-xxh64+crc32:" + blob[-4:].hex() + ":")
    assert decode(codec, blob, len(raw), checksum) == raw
    # The planes really are planes: low bytes first, then high bytes.
    import zstandard
    planes = zstandard.ZstdDecompressor().decompress(blob)
    assert planes[: len(raw) // 2] == raw[0::2] and planes[len(raw) // 2:] == raw[1::2]


# -- restoring along a path -------------------------------------------------------------


def put_rows(archive, messages, fp=FP):
    for m in messages:
        archive.kv.put(m.id, fp, "rows", 4, kv_bytes(m.id))


def restorable(archive, message, fp=FP):
    r = archive.kv.deepest_restorable(message.id, fp)
    return None if r is None else (r.message_id, r.depth, r.kind)


def test_deepest_restorable_complete_chain(archive, chain):
    assert restorable(archive, chain[-1]) is None
    put_rows(archive, chain)
    leaf = chain[-1]
    assert restorable(archive, leaf) == (leaf.id, 5, "rows")
    assert restorable(archive, chain[2]) == (chain[2].id, 2, "rows")
    assert archive.kv.deepest_restorable(424242, FP) is None


def test_deepest_along_a_window_skips_what_the_window_leaves_out(archive, chain):
    window = [chain[0].id] + [m.id for m in chain[3:]]     # the system prompt, then from m2 on
    key = FP + "/window"
    assert archive.kv.deepest_along(window, key) is None
    for m in [chain[0], chain[3], chain[4]]:
        archive.kv.put(m.id, key, "rows", 4, kv_bytes(m.id))
    point = archive.kv.deepest_along(window, key)
    assert (point.message_id, point.depth, point.kind) == (chain[4].id, 2, "rows")
    assert [r.message_id for r in archive.kv.rows_index(chain[4].id, key)] == window[:3]
    archive.kv.delete(chain[3].id, key)
    assert archive.kv.deepest_along(window, key).message_id == chain[0].id
    archive.kv.put(chain[5].id, key, "snapshot", 20, kv_bytes(1, n_tokens=20))
    point = archive.kv.deepest_along(window, key)
    assert (point.message_id, point.kind) == (chain[5].id, "snapshot")
    assert archive.kv.deepest_along(window, FP) is None      # the path's own key holds nothing here


def test_deepest_restorable_stops_at_a_gap(archive, chain):
    put_rows(archive, chain)
    archive.kv.delete(chain[3].id, FP)
    assert restorable(archive, chain[-1]) == (chain[2].id, 2, "rows")
    archive.kv.delete(chain[0].id, FP)
    assert restorable(archive, chain[-1]) is None


def test_snapshot_deeper_than_the_rows_chain(archive, chain):
    put_rows(archive, chain[:2])
    archive.kv.put(chain[4].id, FP, "snapshot", 20, b"whole state")
    assert restorable(archive, chain[-1]) == (chain[4].id, 4, "snapshot")
    assert restorable(archive, chain[3]) == (chain[1].id, 1, "rows")
    # A snapshot shallower than the rows chain loses; at the same depth rows win.
    put_rows(archive, chain[2:])
    assert restorable(archive, chain[-1]) == (chain[5].id, 5, "rows")
    archive.kv.put(chain[5].id, FP, "snapshot", 24, b"whole state")
    assert restorable(archive, chain[-1]) == (chain[5].id, 5, "rows")
    # Snapshot only, no rows at all.
    for m in chain:
        archive.kv.delete(m.id, FP)
    assert restorable(archive, chain[-1]) == (chain[5].id, 5, "snapshot")
    assert restorable(archive, chain[3]) is None  # the snapshot is below chain[3]


def test_other_fingerprint_is_ignored(archive, chain):
    put_rows(archive, chain, fp=OTHER_FP)
    archive.kv.put(chain[5].id, OTHER_FP, "snapshot", 24, b"s")
    assert restorable(archive, chain[-1]) is None
    assert restorable(archive, chain[-1], OTHER_FP) == (chain[5].id, 5, "rows")
    put_rows(archive, chain[:3])
    assert restorable(archive, chain[-1]) == (chain[2].id, 2, "rows")
    assert [s.message_id for s in archive.kv.rows_along_path(chain[-1].id, FP)] == [
        m.id for m in chain[:3]]


def test_fork_shares_the_chain(archive, chain):
    put_rows(archive, chain)
    fork = archive.fork(chain[3].id)
    f1 = archive.add_message(fork.id, "assistant", "fork answer")
    f2 = archive.add_message(fork.id, "user", "fork question")
    assert restorable(archive, f2) == (chain[3].id, 3, "rows")  # the shared part
    put_rows(archive, [f2])
    assert restorable(archive, f2) == (chain[3].id, 3, "rows")  # f1 is a gap
    put_rows(archive, [f1])
    assert restorable(archive, f2) == (f2.id, 5, "rows")
    assert [s.message_id for s in archive.kv.rows_along_path(f2.id, FP)] == [
        *(m.id for m in chain[:4]), f1.id, f2.id]
    assert restorable(archive, chain[-1]) == (chain[-1].id, 5, "rows")  # original untouched


def test_rows_along_path_order_and_content(archive, chain):
    for m in reversed(chain):  # stored deepest first: order must come from the path
        archive.kv.put(m.id, FP, "rows", 4, kv_bytes(m.id), plane_width=1 + m.id % 2)
    archive.kv.put(chain[2].id, FP, "snapshot", 12, b"not a row")
    archive.kv.put(chain[2].id, OTHER_FP, "rows", 4, b"other model")
    segments = archive.kv.rows_along_path(chain[-1].id, FP)
    assert [s.message_id for s in segments] == [m.id for m in chain]
    assert all(s.kind == "rows" for s in segments)
    assert b"".join(s.decode() for s in segments) == b"".join(kv_bytes(m.id) for m in chain)
    assert [s.message_id for s in archive.kv.rows_along_path(chain[2].id, FP)] == [
        m.id for m in chain[:3]]
    assert archive.kv.rows_along_path(424242, FP) == []


def usage(archive, fp=None):
    u = archive.kv.usage(fp)
    return (u.segments, u.stored_bytes, u.raw_bytes)


def test_usage(archive, chain):
    assert usage(archive) == (0, 0, 0)
    sizes = []
    for m in chain[:3]:
        raw = kv_bytes(m.id, n_tokens=8)
        sizes.append((archive.kv.put(m.id, FP, "rows", 8, raw), len(raw)))
    other = archive.kv.put(chain[0].id, OTHER_FP, "snapshot", 8, b"\x00" * 1000)
    assert usage(archive) == (
        4, sum(s for s, _ in sizes) + other, sum(r for _, r in sizes) + 1000)
    assert usage(archive, FP) == (3, sum(s for s, _ in sizes), sum(r for _, r in sizes))
    assert usage(archive, OTHER_FP) == (1, other, 1000)
    assert usage(archive, "nobody") == (0, 0, 0)
    assert other < 1000  # zeros compress
