"""Rebuilding a path's state from its messages' KV row segments, on a pool of threads.

The caller's thread reads the segments one by one from SQLite; the pool
decompresses each and copies it straight into its place in the state
meanwhile (zstd and numpy release the GIL, so they overlap the reads).
"""

import functools
import os
from concurrent.futures import ThreadPoolExecutor

from chatdb.kv import CorruptKV

from . import kvlayout

POOL_THREADS_MAX = 4   # threads placing segments: one per core, at most this many


class SegmentFault(Exception):
    """One segment could not be decoded or placed."""

    def __init__(self, message_id: int, reason: str):
        super().__init__(f"message {message_id}: {reason}")
        self.message_id = message_id


def assemble(layout: kvlayout.Layout, refs, planes_of):
    """The state of the segments `refs` (chatdb.kv.SegmentRef, in path order), as a numpy buffer.

    planes_of(ref) runs on this thread (it reads) and returns a callable that
    gives the segment's decoded byte planes (run on the pool). A segment that
    fails raises SegmentFault naming its message; one missing raises CorruptKV.
    """
    spans = [(r.n_tokens, layout.tail(r.n_tokens, r.raw_size)) for r in refs] if layout.window else None
    assembly = kvlayout.Assembly(layout, sum(r.n_tokens for r in refs), spans)
    pool, first, pending = decoder_pool(), 0, []
    for ref in refs:
        pending.append((ref, pool.submit(_place, assembly, planes_of(ref), ref.n_tokens, first)))
        first += ref.n_tokens
    fault = None
    for ref, done in pending:  # every placing thread is done before the buffer is handed on
        if (error := done.result()) is not None and fault is None:
            fault = SegmentFault(ref.message_id, error)
    if fault is not None:
        raise fault
    return assembly.buffer


def _place(assembly: kvlayout.Assembly, planes, n_tokens: int, first: int) -> "str | None":
    """Decode one segment (planes: a callable) into its place; what went wrong, or None."""
    try:
        if assembly.place_planes(planes(), first, n_tokens) != n_tokens:
            return f"segment holds other than its {n_tokens} tokens"
    except (CorruptKV, kvlayout.LayoutMismatch) as exc:
        return str(exc)
    return None


@functools.lru_cache(maxsize=1)
def decoder_pool() -> ThreadPoolExecutor:
    """The process's pool for decompressing and placing segments (prefetch uses it too)."""
    return ThreadPoolExecutor(max_workers=min(POOL_THREADS_MAX, os.cpu_count() or 1),
                              thread_name_prefix="chatdb-kv-decode")
