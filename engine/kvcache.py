"""Getting the model's KV for a prompt: from the live context, memory, or the archive.

Sources, best first for the same length: what the context already holds
(prefix reuse), recently used states kept in memory (switching between
chats), and the archive (any message of any conversation, any process).
Whatever none of them holds is computed.
"""

import functools
import os
import time
from concurrent.futures import ThreadPoolExecutor
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from chatdb.archive import Archive
from chatdb.kv import CorruptKV

from . import kvlayout
from .decode import Decoder
from .model import Model
from .prompt import PathTokens

MEMORY_BUDGET = 1 << 30       # bytes of states kept in memory across switches
MIN_STASH_TOKENS = 64         # shorter contexts are cheaper to recompute than to keep


@dataclass
class Acquired:
    restored_tokens: int      # tokens whose KV came from a source
    source: str               # "live", "memory", "archive" or "none"
    computed_tokens: int
    restore_ms: float         # time to obtain the restored KV (0 for live)
    compute_ms: float
    ahead: bool = False       # restored before the turn began (Engine.prepare)


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else n


class MemoryStates:
    """A bounded LRU of whole sequence states, keyed by the tokens they hold."""

    def __init__(self, budget: int = MEMORY_BUDGET):
        self.budget = budget
        self.entries: "OrderedDict[bytes, tuple[np.ndarray, memoryview]]" = OrderedDict()

    def put(self, tokens: np.ndarray, state: memoryview) -> None:
        key = tokens.tobytes()
        self.entries.pop(key, None)
        self.entries[key] = (tokens.copy(), state)
        while sum(s.nbytes for _, s in self.entries.values()) > self.budget and len(self.entries) > 1:
            self.entries.popitem(last=False)

    def best(self, target: np.ndarray) -> "tuple[int, bytes | None]":
        """(length of the longest shared prefix, key of that entry)."""
        best_len, best_key = 0, None
        for key, (tokens, _) in self.entries.items():
            n = common_prefix(tokens, target)
            if n > best_len:
                best_len, best_key = n, key
        return best_len, best_key

    def take(self, key: bytes) -> memoryview:
        self.entries.move_to_end(key)
        return self.entries[key][1]

    def __contains__(self, tokens: np.ndarray) -> bool:
        return tokens.tobytes() in self.entries


class KVCache:
    def __init__(self, model: Model, decoder: Decoder, archive: Archive, fingerprint: str,
                 layout: "kvlayout.Layout | None", use_archive: bool, warn=None,
                 early: "dict | None" = None):
        self.model, self.decoder, self.archive = model, decoder, archive
        self.fingerprint, self.layout, self.use_archive = fingerprint, layout, use_archive
        self.warn = warn or (lambda message: None)
        self.live = np.zeros(0, np.int32)   # the tokens whose KV sequence 0 holds
        self.memory = MemoryStates()
        self.ahead: "tuple[str, float] | None" = None   # (source, ms) of a warm() not yet used
        # message id -> Future of its decoded planes, read while the model loaded
        # (prefetch.EarlyRead); used by the first restore only
        self.early: dict = early or {}
        self._warned: set[str] = set()

    def acquire(self, target: np.ndarray, path: "PathTokens | None", progress=None) -> Acquired:
        """Make sequence 0 hold the KV of `target` (logits ready for its last token)."""
        started = time.perf_counter()
        # The last token is always computed, for its logits.
        source, n = self._restore(target, path, self.archive, limit=len(target) - 1, warn=self.warn)
        restore_ms = (time.perf_counter() - started) * 1000 if source != "live" else 0.0
        ahead = source == "live" and self.ahead is not None and n > 0
        if ahead:  # restored while the user typed: say where from, and how long it took
            source, restore_ms = self.ahead
        self.ahead = None
        computed = target[n:]
        t = time.perf_counter()
        self.decoder.prefill(computed.tolist(), n, progress)
        self.live = target.copy()
        return Acquired(n, source, len(computed), restore_ms, (time.perf_counter() - t) * 1000, ahead)

    def warm(self, path: PathTokens, archive: Archive, warn) -> None:
        """Restore as much of `path` as any source holds, computing nothing.

        Runs ahead of a turn (Engine.prepare), on its own archive connection;
        problems go to `warn`, that thread's own.
        """
        started = time.perf_counter()
        source, n = self._restore(path.flat(), path, archive,
                                  limit=path.ends()[-1] if path.arrays else 0, warn=warn)
        ms = (time.perf_counter() - started) * 1000
        self.ahead = (source, ms) if source in ("memory", "archive") else None

    def _restore(self, target: np.ndarray, path: "PathTokens | None", archive: Archive,
                 limit: int, warn) -> "tuple[str, int]":
        """Load the best source's KV for up to `limit` tokens of `target`: (source, tokens held)."""
        live_n = common_prefix(self.live, target)
        mem_n, mem_key = self.memory.best(target)
        arch = (self._archive_point(path, archive, warn) if path is not None and self.use_archive
                else None)
        arch_n = arch[0] if arch else 0
        source, n = "live", min(live_n, limit)
        if min(mem_n, limit) > n:
            source, n = "memory", min(mem_n, limit)
        if min(arch_n, limit) > n:
            source, n = "archive", min(arch_n, limit)
        if len(self.live) - (n if source == "live" else 0) >= MIN_STASH_TOKENS:
            self._stash()  # about to drop much of the live state: keep it for a switch back
        if source != "live":
            loaded = (self._load(self.memory.take(mem_key), warn) if source == "memory"
                      else self._load_archive(archive, *arch[1:], warn))
            if not loaded:
                source, n = "none", 0
        if source == "live" and n == 0:
            source = "none"
        self.model.forget_from(n)
        self.live = self.live[:n] if source in ("live", "none") else target[:n].copy()
        self.early = {}  # read for the first restore only
        return source, n

    def follow(self, context: np.ndarray) -> None:
        """Hold the KV of `context`, computing only what differs from what is held."""
        n = min(common_prefix(self.live, context), len(context) - 1)
        self.model.forget_from(n)
        self.live = self.live[:n]
        self.extend(context[n:])

    def extend(self, tokens) -> None:
        """Decode tokens after the live ones (an answer's unprocessed tail)."""
        if len(tokens):
            self.decoder.prefill(list(tokens), len(self.live))
            self.live = np.concatenate([self.live, np.asarray(tokens, np.int32)])

    def mark_decoded(self, tokens: list[int]) -> None:
        """Record tokens the decode loop has fed to the model itself."""
        if tokens:
            self.live = np.concatenate([self.live, np.asarray(tokens, np.int32)])

    def reset(self) -> None:
        self.model.clear()
        self.live = np.zeros(0, np.int32)

    # -- sources ---------------------------------------------------------------

    def _archive_point(self, path: PathTokens, archive: Archive, warn):
        """(tokens restorable, message id, kind) for the deepest stored point on the path."""
        if not path.stable or not path.message_ids:
            return None
        point = archive.kv.deepest_restorable(path.message_ids[-1], self.fingerprint)
        if point is None:
            self._check_foreign(archive, path.message_ids[0], warn)
            return None
        index = path.message_ids.index(point.message_id)
        return path.ends()[index], point.message_id, point.kind

    def _check_foreign(self, archive: Archive, message_id: int, warn) -> None:
        others = archive.kv.fingerprints_for(message_id)
        if others and self.fingerprint not in others and "foreign" not in self._warned:
            self._warned.add("foreign")
            warn("stored KV state was made by another model or configuration; recomputing")

    def _load_archive(self, archive: Archive, message_id: int, kind: str, warn) -> bool:
        try:
            if kind == "snapshot":
                state = archive.kv.get(message_id, self.fingerprint, "snapshot").decode()
            else:
                state = self._assemble(archive, message_id)
        except (CorruptKV, kvlayout.LayoutMismatch) as exc:
            self._report_corrupt(exc, warn)
            return False
        return self._load(state, warn)

    def _assemble(self, archive: Archive, message_id: int) -> np.ndarray:
        """The path's state: segments read here, decoded and placed by the pool meanwhile."""
        kv = archive.kv
        refs = kv.rows_index(message_id, self.fingerprint)
        assembly = kvlayout.Assembly(self.layout, sum(r.n_tokens for r in refs))
        pool, first, pending = decoder_pool(), 0, []
        for ref in refs:  # zstd and numpy release the GIL: decoding overlaps the reads
            planes = self._planes(kv, ref.message_id)
            pending.append((ref, pool.submit(_place, assembly, planes, ref.n_tokens, first)))
            first += ref.n_tokens
        for ref, done in pending:
            if (error := done.result()) is not None:
                self._drop(archive, ref.message_id)
                raise CorruptKV(f"message {ref.message_id}: {error}")
        return assembly.buffer

    def _planes(self, kv, message_id: int):
        """A callable giving a segment's decoded planes: decoded early, or read now."""
        early = self.early.pop(message_id, None)
        if early is not None:
            return early.result
        segment = kv.get(message_id, self.fingerprint)
        if segment is None:
            raise CorruptKV(f"message {message_id}: segment deleted while reading")
        return segment.planes

    def _drop(self, archive: Archive, message_id: int) -> None:
        """Delete a corrupt segment so the recomputed one can replace it."""
        with archive.transaction():
            archive.kv.delete(message_id, self.fingerprint, "rows")
            archive.kv.delete(message_id, self.fingerprint, "snapshot")

    def _report_corrupt(self, exc: Exception, warn) -> None:
        if "corrupt" not in self._warned:
            self._warned.add("corrupt")
            warn(f"stored KV state is damaged ({exc}); recomputing")

    def _load(self, state, warn) -> bool:
        ok = self.model.set_state(state)
        if not ok:
            self._report_corrupt(Exception("llama.cpp refused the state"), warn)
        return ok

    def _stash(self) -> None:
        """Keep the live state in memory before another replaces it."""
        if self.live not in self.memory:
            self.memory.put(self.live, self.model.get_state())


def _place(assembly: kvlayout.Assembly, planes, n_tokens: int, first: int) -> "CorruptKV | None":
    """Decode one segment (planes: a callable) into its place; a fault is returned, for the caller to drop it."""
    try:
        if assembly.place_planes(planes(), first) != n_tokens:
            return CorruptKV(f"segment holds other than its {n_tokens} tokens")
    except (CorruptKV, kvlayout.LayoutMismatch) as exc:
        return CorruptKV(str(exc))
    return None


@functools.lru_cache(maxsize=1)
def decoder_pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1),
                              thread_name_prefix="chatdb-kv-decode")
