"""A sequence's state in a context of several KV streams, as in a context of one.

With several sequences and no unified cache (kv_unified off), llama.cpp
keeps one KV stream per sequence, so a sequence's cells sit where they
would alone and its greedy answer is the same whatever else is in the
batch (in one unified cache its cells land at offsets that depend on the
others, and the attention sums change). Its state then lists every stream.
After the 8-byte header, each part (one for a plain cache; the
full-attention then the sliding-window cache of an iSWA model) is

    u32 n_stream, then per stream: u32 cell_count and, where cells are,
    the cells' metadata (i32 pos, u32 n_seq_id, i32 seq_id[n_seq_id])
    and their data (u32 v_trans, u32 n_layer, K blocks, V blocks)

(llama_kv_cache::state_write). Only the sequence's own stream has cells,
and reading a state llama.cpp puts the cells into the sequence's stream
whatever stream they were listed under. The archive and memory keep the
one-stream form (n_stream 1), which a one-sequence context (the console)
reads and writes: the server and the console restore each other's KV.
"""

import struct

import numpy as np

HEADER = 8
U32, U64 = struct.Struct("<I"), struct.Struct("<Q")


def to_single(state, n_stream: int, parts: int) -> np.ndarray:
    """The one-stream form of a sequence's state taken from an n_stream context."""
    buf = np.frombuffer(state, np.uint8)
    pieces, off = [buf[:HEADER]], HEADER
    for _ in range(parts):
        if _u32(buf, off) != n_stream:
            raise ValueError("the state does not list the context's streams")
        off += 4
        block = _zero()
        for _ in range(n_stream):
            end = _stream_end(buf, off)
            if end > off + 4:
                block = buf[off:end]   # the one stream with cells
            off = end
        pieces += [np.frombuffer(U32.pack(1), np.uint8), block]
    if off != len(buf):
        raise ValueError("the state has bytes after its parts")
    return np.concatenate(pieces)


def to_streams(state, n_stream: int, parts: int) -> np.ndarray:
    """A one-stream state laid out for an n_stream context (its cells under stream 0,
    the other streams empty)."""
    buf = np.frombuffer(state, np.uint8)
    pieces, off = [buf[:HEADER]], HEADER
    empty = np.zeros(4 * (n_stream - 1), np.uint8)
    for _ in range(parts):
        if _u32(buf, off) != 1:
            raise ValueError("not a one-stream state")
        end = _stream_end(buf, off + 4)
        pieces += [np.frombuffer(U32.pack(n_stream), np.uint8), buf[off + 4:end], empty]
        off = end
    if off != len(buf):
        raise ValueError("the state has bytes after its parts")
    return np.concatenate(pieces)


def _stream_end(buf: np.ndarray, off: int) -> int:
    """Where the stream listed at `off` (its cell count first) ends."""
    count = _u32(buf, off)
    off += 4
    if count == 0:
        return off
    for _ in range(count):                    # pos, n_seq_id, seq ids
        off += 8 + 4 * _u32(buf, off + 4)
    v_trans, n_layer = _u32(buf, off), _u32(buf, off + 4)
    off += 8
    for _ in range(n_layer):                  # K: type, row size, rows
        off += 12 + _u64(buf, off + 4) * count
    for _ in range(n_layer):
        if v_trans:                           # type, element size, n_embd, elements
            off += 12 + _u32(buf, off + 4) * _u32(buf, off + 8) * count
        else:
            off += 12 + _u64(buf, off + 4) * count
    if off > len(buf):
        raise ValueError("the state ends inside a stream")
    return off


def _u32(buf: np.ndarray, off: int) -> int:
    try:
        return U32.unpack_from(buf, off)[0]
    except struct.error:
        raise ValueError("the state ends early") from None


def _u64(buf: np.ndarray, off: int) -> int:
    try:
        return U64.unpack_from(buf, off)[0]
    except struct.error:
        raise ValueError("the state ends early") from None


def _zero() -> np.ndarray:
    return np.frombuffer(U32.pack(0), np.uint8)
