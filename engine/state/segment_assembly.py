"""Rebuilding a path's state from its messages' KV row segments, on a pool of threads.

The caller's thread reads the segments one by one from SQLite; the pool
decompresses each and copies it straight into its place in the state
meanwhile (zstd and numpy release the GIL, so they overlap the reads).
"""

import functools
import os
from concurrent.futures import ThreadPoolExecutor

from chatdb.kv.store import CorruptKV

from . import kvlayout

POOL_THREADS_MAX = 4   # threads placing segments: one per core, at most this many


class SegmentFault(Exception):
    """One segment, or the shared run it begins with (`shared_id`), could not be decoded or placed."""

    def __init__(self, message_id: int, reason: str, shared_id: "int | None" = None):
        where = f"message {message_id}" + (f", shared rows {shared_id}" if shared_id is not None else "")
        super().__init__(f"{where}: {reason}")
        self.message_id, self.shared_id = message_id, shared_id


def assemble(layout: kvlayout.Layout, refs, planes_of, shared_of=None):
    """The state of the segments `refs` (chatdb.kv.SegmentRef, in path order), as a numpy buffer.

    planes_of(ref) runs on this thread (it reads) and returns a callable that
    gives the segment's decoded byte planes (run on the pool); shared_of(ref)
    the same for the shared run a segment begins with (ref.shared_id), placed
    as a segment of its own. A segment that fails raises SegmentFault naming
    its message (and the shared run, if that failed); one missing raises CorruptKV.
    """
    spans = [(r.n_tokens, layout.tail(r.n_tokens, r.raw_size)) for r in refs] if layout.window else None
    assembly = kvlayout.Assembly(layout, sum(r.n_tokens for r in refs), spans)
    pool, first, pending = decoder_pool(), 0, []
    for ref in refs:
        own = ref.n_tokens
        if ref.shared_id is not None:
            own -= ref.shared_tokens
            pending.append((ref, ref.shared_id,
                            pool.submit(_place, assembly, shared_of(ref), ref.shared_tokens, first)))
        pending.append((ref, None, pool.submit(_place, assembly, planes_of(ref), own, first + ref.n_tokens - own)))
        first += ref.n_tokens
    fault = None
    for ref, shared_id, done in pending:  # every placing thread is done before the buffer is handed on
        if (error := done.result()) is not None and fault is None:
            fault = SegmentFault(ref.message_id, error, shared_id)
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
