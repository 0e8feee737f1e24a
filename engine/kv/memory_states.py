"""Recently used sequence states, kept in memory: switching back to a chat is a copy.

A state source (sources.py): it offers the entry sharing the longest
prefix with the target. Entries are whole states as llama.cpp gives them,
which load into any sequence, so one MemoryStates may serve several. A
sliding-window model's state holds only its window's sliding-window cells;
it is widened to every position as it loads (kvlayout.widen, older rows
zeros). Such a state longer than the window serves only a target that goes
on from (nearly) its end: cut back further, the next token's window would
reach rows it does not hold (`cuts_to`); the archive's rows, which keep each
message's window, serve a branch from an earlier message instead.

Each entry is kept under the name of the user whose request made it (None:
the archive's own): on a server several people share, one user's state never
serves another's prompt, however long the prefix they share.
"""

from collections import OrderedDict

import numpy as np

from ..llama.sequence import Sequence, window_intact
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
        """(length of the longest prefix shared with one of `owner`'s entries that the entry
        can be cut back to, its key)."""
        best_len, best_key = 0, None
        for key, (tokens, _) in self.entries.items():
            if key[0] != owner:
                continue
            n = common_prefix(tokens, target)
            if n > best_len and self.cuts_to(len(tokens), n):
                best_len, best_key = n, key
        return best_len, best_key

    def cuts_to(self, held: int, n: int) -> bool:
        """Whether a state of `held` tokens, cut back to its first `n`, is what the live
        context holds there: a sliding-window model's state has the sliding-window rows of
        its last window positions only, so n >= held - 1 or a state within the window."""
        window = self.layout.window if self.layout is not None else None
        return window_intact(n, held - (window or 0), window)
