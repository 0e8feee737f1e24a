"""Recently used sequence states, kept in memory: switching back to a chat is a copy.

A state source (sources.py): it offers the entry sharing the longest
prefix with the target. Entries are whole states as llama.cpp gives them,
which load into any sequence, so one MemoryStates may serve several. A
sliding-window model's state holds only its window's sliding-window cells;
it is widened to every position as it loads (kvlayout.widen), so that the
sequence can then be cut back to an earlier point as a live one can.

Each entry is kept under the name of the user whose request made it (None:
the archive's own): on a server several people share, one user's state never
serves another's prompt, however long the prefix they share.
"""

from collections import OrderedDict

import numpy as np

from ..llama.sequence import Sequence
from ..state import kvlayout
from .modes import KVSource
from .sources import LoadFailed, Offer, Request, common_prefix

MEMORY_BUDGET = 1 << 30       # bytes of states kept in memory across switches


class MemoryStates:
    """A bounded LRU of whole sequence states, keyed by their owner and the tokens they hold."""

    def __init__(self, layout: "kvlayout.Layout | None" = None, budget: int = MEMORY_BUDGET):
        self.budget, self.layout = budget, layout
        self.entries: "OrderedDict[tuple, tuple[np.ndarray, memoryview]]" = OrderedDict()

    def offer(self, request: Request, seq: Sequence) -> "Offer | None":
        n, key = self.best(request.target, request.owner)
        if key is None:
            return None
        tokens, state = self.entries[key]  # held here: a stash meanwhile may evict the entry
        return Offer(KVSource.MEMORY, min(n, request.limit), lambda seq: self._load(seq, key, tokens, state))

    def _load(self, seq: Sequence, key: tuple, tokens: np.ndarray, state) -> None:
        if key in self.entries:
            self.entries.move_to_end(key)
        if self.layout is not None and self.layout.window:
            try:
                state = kvlayout.widen(state, kvlayout.parse(state, self.layout.window))
            except kvlayout.LayoutMismatch as exc:
                raise LoadFailed(str(exc)) from None
        if not seq.load(state, tokens):
            raise LoadFailed("llama.cpp refused the state")

    def stash(self, seq: Sequence, owner: "str | None" = None) -> None:
        """Keep the sequence's state (`owner`'s) before another replaces it."""
        if (owner, seq.tokens.tobytes()) not in self.entries:
            self.put(seq.tokens, seq.state(), owner)

    def put(self, tokens: np.ndarray, state: memoryview, owner: "str | None" = None) -> None:
        key = (owner, tokens.tobytes())
        self.entries.pop(key, None)
        self.entries[key] = (tokens.copy(), state)
        while sum(s.nbytes for _, s in self.entries.values()) > self.budget and len(self.entries) > 1:
            self.entries.popitem(last=False)

    def best(self, target: np.ndarray, owner: "str | None" = None) -> "tuple[int, tuple | None]":
        """(length of the longest prefix shared with one of `owner`'s entries, its key)."""
        best_len, best_key = 0, None
        for key, (tokens, _) in self.entries.items():
            if key[0] != owner:
                continue
            n = common_prefix(tokens, target)
            if n > best_len:
                best_len, best_key = n, key
        return best_len, best_key
