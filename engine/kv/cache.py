"""Getting a sequence's KV for a prompt: the best source's state (a slot computes the rest).

Sources (sources.py), best first for the same length: what the sequence
already holds (prefix reuse), recently used states kept in memory
(switching between chats), and the archive (any message of any
conversation, any process). If the chosen one fails to load, the next best
is taken: a damaged segment costs only what the live context does not hold.

On a server several people share, every restore names its user (`owner`,
None for the archive's own): a sequence holding another user's tokens is
emptied first (its state kept in memory under that user's name), and memory
offers only the user's own states, so that no one's prompt is ever read, or
sped up, by another's KV. The archive's KV is reached through the user's own
messages (chatdb.message_match matched them).
"""

import time
from dataclasses import dataclass

import numpy as np

from chatdb.archive import Archive

from ..llama.sequence import Sequence
from ..prompt.path_tokens import PathTokens
from ..state import kvlayout
from .archive_checkpoints import ArchiveCheckpoints
from .archive_rows import ArchiveRows
from .archive_snapshot import ArchiveSnapshot
from .modes import KVMode, KVSource
from .memory_states import MemoryStates
from .sources import ArchiveSource, LivePrefix, LoadFailed, Offer, Request, Vanished, common_prefix
from .writer import StoreJob

MIN_STASH_TOKENS = 64         # shorter contexts are cheaper to recompute than to keep


@dataclass(frozen=True)
class Restored:
    """What a restore gave: how many tokens of the prompt, from where, how fast."""
    restored_tokens: int      # tokens whose KV came from a source
    source: KVSource
    restore_ms: float         # time to obtain the restored KV (0 for live)
    ahead: bool = False       # restored before the turn began (Engine.prepare)


def archive_source(kv_mode: KVMode, fingerprint: str,
                   layout: "kvlayout.Layout | None") -> ArchiveSource:
    """The source that restores and stores a model's KV in the archive, by its KV mode
    (layout_check's choice; the mode is part of the fingerprint, so only one kind is
    ever stored under it). A new kind of stored memory is one more line here."""
    if kv_mode in (KVMode.ROWS, KVMode.WINDOW):   # the layout's window tells them apart
        return ArchiveRows(fingerprint, layout)
    if kv_mode == KVMode.CHECKPOINT:
        return ArchiveCheckpoints(fingerprint, layout)
    if kv_mode == KVMode.SNAPSHOT:
        return ArchiveSnapshot(fingerprint)
    raise ValueError(f"unknown KV mode {kv_mode!r}")


class KVCache:
    """One sequence's KV and where it comes from."""

    def __init__(self, seq: Sequence, archive: Archive, stored: ArchiveSource, use_archive: bool,
                 warn=None, early: "dict | None" = None, memory: "MemoryStates | None" = None):
        self.seq, self.archive, self.stored = seq, archive, stored
        self.fingerprint = stored.fingerprint
        self.use_archive = use_archive
        self.warn = warn or (lambda message: None)
        # May be shared by several caches: a state loads into any sequence.
        self.memory = memory if memory is not None else MemoryStates(stored.layout)
        self.captured: "tuple[int, memoryview] | None" = None   # see captures
        # Best first where offers are as long.
        self.sources = [LivePrefix(), self.memory] + ([self.stored] if use_archive else [])
        self.ahead: "tuple[KVSource, float] | None" = None   # (source, ms) of a warm() not yet used
        # message id -> Future of its decoded planes, read while the model loaded
        # (prefetch.EarlyRead); for the first restore only
        self.early: dict = early or {}
        self._warned: set[str] = set()
        self.holder: "str | None" = None   # whose tokens the sequence holds

    @property
    def live(self) -> np.ndarray:
        """The tokens whose KV the sequence holds."""
        return self.seq.tokens

    def restore(self, target: np.ndarray, path: "PathTokens | None",
                limit: "int | None" = None, window_key: "str | None" = None,
                owner: "str | None" = None) -> Restored:
        """Make the sequence hold as much of `target` as a source gives, up to `limit`
        tokens (default: all but the last, always computed for its logits), computing
        nothing: the rest is for a slot to compute. `window_key`: `path` is a window
        (window.py), its KV stored under that key. Where a restore ahead of the turn
        (warm) left the sequence holding it, it says where that came from. `owner`: whose
        request it is; nobody else's KV serves it."""
        started = time.perf_counter()
        self._serve(owner)
        limit = len(target) - 1 if limit is None else limit
        request = self._request(target, path, self.archive, limit, window_key)
        request.owner = owner
        offer = self._restore(request, self.warn)
        n, source = offer.n_tokens, offer.source if offer.n_tokens else KVSource.NONE
        restore_ms = (time.perf_counter() - started) * 1000 if source != KVSource.LIVE else 0.0
        ahead = source == KVSource.LIVE and self.ahead is not None
        if ahead:  # restored while the user typed: say where from, and how long it took
            source, restore_ms = self.ahead
        self.ahead = self.captured = None
        return Restored(n, source, restore_ms, ahead)

    def _serve(self, owner: "str | None") -> None:
        """Hold nothing of another user's before serving `owner` (kept in memory as theirs)."""
        if owner == self.holder:
            return
        if len(self.seq.tokens) >= MIN_STASH_TOKENS:
            self.memory.stash(self.seq, self.holder)
        self.seq.keep(0)
        self.holder, self.ahead = owner, None

    @property
    def captures(self) -> bool:
        """Whether store_job wants the state at the question's end: the source says (a
        window's rows, a hybrid's checkpoint). By the answer's end the state llama.cpp
        writes may have lost the question's last window of sliding-window rows, and a
        recurrent state has moved on from the question's end."""
        return getattr(self.stored, "captures", False)

    def capture(self, boundary: int) -> None:
        """Keep the state the sequence holds now, at a message boundary, for store_job."""
        self.captured = (boundary, self.seq.state())

    def warm(self, path: PathTokens, archive: Archive, warn) -> None:
        """Restore as much of `path` as any source holds, computing nothing.

        Runs ahead of a turn (Engine.prepare), on its own archive connection;
        problems go to `warn`, that thread's own.
        """
        started = time.perf_counter()
        limit = path.ends()[-1] if path.arrays else 0
        offer = self._restore(self._request(path.flat(), path, archive, limit), warn)
        ms = (time.perf_counter() - started) * 1000
        self.ahead = (offer.source, ms) if offer.source != KVSource.LIVE and offer.n_tokens else None

    def _request(self, target, path, archive, limit, window_key=None) -> Request:
        if window_key is None:
            request = Request(target, path, archive, self.fingerprint, limit, self.early)
        else:  # segments read early are the whole path's, not the window's
            request = Request(target, path, archive, window_key, limit, {}, window=True)
        self.early = {}  # read for the first restore only
        return request

    def _restore(self, request: Request, warn) -> Offer:
        """Load the best offer that loads; the sequence then holds its tokens."""
        if self.use_archive and request.stored_elsewhere():
            self._report("foreign", "stored KV state was made by another model or configuration; "
                                    "recomputing", warn)
        failed: list = []
        sources = self._sources(request)
        while True:
            source, offer = self._best(request, sources, failed)
            dropped = len(self.seq.tokens) - (offer.n_tokens if offer.source == KVSource.LIVE else 0)
            if dropped >= MIN_STASH_TOKENS:
                self.memory.stash(self.seq, self.holder)  # about to drop much: keep it for a switch back
            try:
                offer.load(self.seq)
            except LoadFailed as exc:
                if isinstance(exc, Vanished) and request.refresh():
                    continue   # dropped meanwhile to keep the budget: offered again, not damaged
                self._report("corrupt", f"stored KV state is damaged ({exc}); recomputing", warn)
                failed.append(source)
                continue  # a refused state empties the sequence: the live offer shrinks too
            self.seq.keep(offer.n_tokens)
            if len(self.seq.tokens) == offer.n_tokens:
                return offer
            # A recurrent state cannot be cut back: the sequence is empty now, and the
            # live prefix offers nothing next time.
            if source is not sources[0]:
                failed.append(source)

    def _best(self, request: Request, sources: list, failed: list) -> "tuple[object, Offer]":
        """(source, offer) of the longest offer, the earlier source where as long."""
        best = None
        for source in sources:
            if source not in failed and (offer := source.offer(request, self.seq)) is not None:
                if best is None or offer.n_tokens > best[1].n_tokens:
                    best = (source, offer)
        return best  # LivePrefix always offers

    def _sources(self, request: Request) -> list:
        """The sources, the archive's reading under the request's key (a window's own)."""
        if request.fingerprint == self.fingerprint or not self.use_archive:
            return self.sources
        return [s for s in self.sources if s is not self.stored] + [self.stored.under(request.fingerprint)]

    def _report(self, kind: str, message: str, warn) -> None:
        """Each kind of problem is reported once per cache."""
        if kind not in self._warned:
            self._warned.add(kind)
            warn(message)

    def sibling(self, seq_id: int) -> "KVCache":
        """A cache for another sequence of the same context (ContextConfig.n_seq_max), with
        the same archive and sharing the memory of recent states (a state loads into any
        sequence). Its owner closes it before the model."""
        return KVCache(Sequence(self.seq.model, seq_id), self.archive, self.stored, self.use_archive,
                       self.warn, memory=self.memory)

    # -- after the restore: the sequence follows what the model is fed --------------

    def follow(self, context: np.ndarray) -> None:
        """Hold the KV of `context`, computing only what differs from what is held."""
        self.seq.keep(min(common_prefix(self.seq.tokens, context), len(context) - 1))
        self.seq.prefill(context[len(self.seq.tokens):])

    def prefix_of(self, target: np.ndarray, owner: "str | None" = None) -> int:
        """How many leading tokens of `target` the sequence holds for `owner`."""
        return common_prefix(self.seq.tokens, target) if owner == self.holder else 0

    def holds(self, path: PathTokens) -> bool:
        """Whether the sequence holds exactly the tokens of `path`."""
        return np.array_equal(self.seq.tokens, path.flat())

    def store_job(self, full: PathTokens, window_key: "str | None" = None) -> StoreJob:
        """The job that stores the sequence's KV of the path `full`, which it holds
        (under `window_key` when `full` is a window)."""
        captured, self.captured = self.captured, None
        stored = self.stored if window_key is None else self.stored.under(window_key)
        return stored.store_job(self.seq, full, captured)

    def truncate(self, n: int) -> None:
        """Forget the KV of tokens from `n` on (an answer cut short)."""
        if n < len(self.seq.tokens):
            self.seq.keep(n)

    def reset(self) -> None:
        """Hold nothing."""
        self.seq.keep(0)

    def close(self) -> None:
        """Let the sequence's decoder go (the cache owns the sequence it was given)."""
        self.seq.close()
