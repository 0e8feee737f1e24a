"""Where a sequence's KV can come from: the interface every state source implements.

A source looks at what the sequence should hold (a Request) and offers the
longest prefix of it that it can load (an Offer). KVCache takes the longest
offer and, if loading it fails, the next one. The sources:

    LivePrefix       what the sequence already holds (here)
    MemoryStates     states of recently used chats, in memory (memory_states.py)
    ArchiveRows      per-message KV rows stored along the path (archive_rows.py)
    ArchiveSnapshot  a whole state stored at a message (archive_snapshot.py)

A new kind of stored memory (sliding-window rows with their window,
recurrent checkpoints) is one more source: its file, and its place in
KVCache's list.
"""

import functools
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np

from chatdb.archive import Archive

from ..llama.sequence import Sequence
from ..prompt.path_tokens import PathTokens
from ..state import kvlayout
from .modes import KVSource
from .writer import StoreJob


class LoadFailed(Exception):
    """What a source offered could not be loaded (damaged, or refused by llama.cpp)."""


class Vanished(LoadFailed):
    """What a source offered is no longer stored: dropped meanwhile (another process keeping
    the KV budget), not damaged. The offers are made again (Request.refresh)."""


@dataclass
class Request:
    """What a sequence should hold, as every source sees it."""
    target: np.ndarray            # the tokens
    path: "PathTokens | None"     # their messages, where the target is a stored path
    archive: Archive              # the calling thread's connection
    fingerprint: str              # the KV configuration of the sequence's model
    limit: int                    # a source gives at most this many tokens; the rest is computed
    early: dict = field(default_factory=dict)   # message id -> Future of decoded planes
    # A window (window.py): the path skips messages of the tree, and its KV is
    # stored under the window's own key (the fingerprint above).
    window: bool = False
    owner: "str | None" = None    # whose request: memory offers only that user's states

    @functools.cached_property
    def stored(self):
        """The deepest point of the path with KV stored under the fingerprint (kv.Restorable),
        looked up once for every archive source."""
        if self.path is None or not self.path.stable or not self.path.message_ids:
            return None
        if self.window:
            return self.archive.kv.deepest_along(self.path.message_ids, self.fingerprint)
        return self.archive.kv.deepest_restorable(self.path.message_ids[-1], self.fingerprint)

    def refresh(self) -> bool:
        """Look up the deepest stored point again; whether it moved (KV dropped meanwhile)."""
        before = self.__dict__.pop("stored", None)
        return self.stored != before

    def tokens_through(self, message_id: int) -> int:
        """Tokens of the path up to and including `message_id`."""
        return self.path.ends()[self.path.message_ids.index(message_id)]

    def stored_elsewhere(self) -> bool:
        """Nothing restorable, but KV of the path stored under another fingerprint."""
        if self.stored is not None or self.path is None or not self.path.stable \
                or not self.path.message_ids:
            return False
        if self.window:
            return False
        others = self.archive.kv.fingerprints_for(self.path.message_ids[0])
        ours = [o for o in others if o == self.fingerprint or o.startswith(self.fingerprint + "/")]
        return bool(others) and not ours   # a window's key extends the fingerprint


@dataclass
class Offer:
    source: KVSource                     # what a turn reports
    n_tokens: int                        # tokens of the target it gives (at most the limit)
    load: Callable[[Sequence], None]     # puts at least those in the sequence; LoadFailed if not


class StateSource(Protocol):
    def offer(self, request: Request, seq: Sequence) -> "Offer | None":
        """The longest prefix of the request's target this source can load, or None."""


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else n


class ArchiveSource:
    """What the archive sources share: the deepest point stored, offered by the source of its
    kind (chatdb.kv KINDS), and the deletion of a damaged one (recomputed KV replaces it)."""
    kind: str

    def __init__(self, fingerprint: str, layout: "kvlayout.Layout | None" = None):
        self.fingerprint, self.layout = fingerprint, layout

    def offer(self, request: Request, seq: Sequence) -> "Offer | None":
        point = request.stored
        if point is None or point.kind != self.kind:
            return None
        n = request.tokens_through(point.message_id)
        return Offer(KVSource.ARCHIVE, min(n, request.limit),
                     lambda seq: self.load(seq, request, point.message_id, n))

    def load(self, seq: Sequence, request: Request, message_id: int, n_tokens: int) -> None:
        """Load the state stored through `message_id` (`n_tokens` tokens); LoadFailed if not."""
        raise NotImplementedError

    def store_job(self, seq: Sequence, full: PathTokens) -> StoreJob:
        """What to store of the sequence, which holds exactly the path `full`, for this
        source to restore later (writer.py writes it)."""
        raise NotImplementedError

    def under(self, key: str) -> "ArchiveSource":
        """This source reading and writing under another key (a window's)."""
        return type(self)(key, self.layout)

    def drop(self, archive: Archive, message_id: int) -> None:
        with archive.transaction():
            archive.kv.delete(message_id, self.fingerprint, self.kind)


class LivePrefix:
    """What the sequence already holds: its tokens' common prefix with the target."""

    def offer(self, request: Request, seq: Sequence) -> Offer:
        n = min(common_prefix(seq.tokens, request.target), request.limit)
        if not seq.cuts_to(n):   # a restored sliding-window state cut back past its window
            n = 0
        return Offer(KVSource.LIVE, n, lambda seq: None)  # KVCache keeps n tokens of any offer
