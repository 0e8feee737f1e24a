"""One sequence of a llama.cpp context: its KV cells and the tokens they hold.

Every change to the sequence's KV goes through here, so `tokens` is always
what the context holds for it. A context may hold several sequences (one
per slot of a server); each has its own `Sequence`, and positions and
cells are per sequence.

Two ways to compute KV: alone (`prefill`, `step`, `verify`: the sequence's
own llama_batch, decoded at once), or in a pass shared with other
sequences: `queue` puts tokens into a MultiBatch (batch.py), and once the
batch is decoded `settle` says how many of them the sequence keeps (drafted
guesses that were wrong are dropped again), or `abandon` drops them all
(a failed or stopped pass).
"""

import llama_cpp
import numpy as np

from .batch import MultiBatch
from .decoder import Decoder
from .model import Model


def window_intact(n: int, rows_from: int, window: "int | None") -> bool:
    """Whether a sliding-window cache whose rows before `rows_from` are zeros (a state
    rebuilt or widened from llama.cpp's, which holds only the last window) can be cut back
    to its first `n` tokens: the token at position n attends to the sliding-window rows
    from n - window + 1 on, and none of them may be a zero row standing for one that was
    never read back. Past that point only a cut to the state's (nearly) full length keeps
    the live context's rows; a model without a window can be cut anywhere."""
    return not window or rows_from <= 0 or n - window + 1 >= rows_from


class Sequence:
    def __init__(self, model: Model, seq_id: int = 0):
        self.model, self.seq_id = model, seq_id
        self._decoder = Decoder(model, seq_id)
        self._held = np.zeros(0, np.int32)    # the tokens whose KV the sequence holds, but
        self._more: list[int] = []            # these, kept by settle since (one per step)
        self._queued: list[int] = []          # in a shared batch, not yet settled
        # Sliding-window rows before this position are zeros (a loaded state holds only the
        # last window's): a cut back must leave the next token's window after it (cuts_to).
        self.window_from = 0

    def __len__(self) -> int:
        return len(self._held) + len(self._more)

    @property
    def tokens(self) -> np.ndarray:
        """The tokens whose KV the sequence holds (an array that is never changed in place)."""
        if self._more:   # joined when asked for, not at every generated token
            self._held = np.concatenate([self._held, np.asarray(self._more, np.int32)])
            self._more = []
        return self._held

    def _hold(self, tokens: np.ndarray) -> None:
        self._held, self._more = tokens, []

    # -- its KV as a whole ------------------------------------------------------

    def keep(self, n: int) -> None:
        """Keep the KV of the first `n` tokens only; a recurrent state, which cannot be cut
        back, is dropped whole instead (then fewer than `n` tokens are held)."""
        if not self.model.forget_from(n, self.seq_id):
            self.model.forget_from(0, self.seq_id)
            n = 0
        self._hold(self.tokens[:n])
        if n == 0:
            self.window_from = 0

    def cuts_to(self, n: int) -> bool:
        """Whether its first `n` tokens, kept, are what the live context holds there (a
        loaded state of a sliding-window model cannot be cut back past its window)."""
        return window_intact(n, self.window_from, self.model.n_swa)

    def load(self, state, tokens: np.ndarray) -> bool:
        """Replace the KV with `state`, which holds `tokens`; False if llama.cpp refused it
        (the sequence is then empty)."""
        ok = self.model.set_state(state, self.seq_id)
        self._hold(np.array(tokens, np.int32) if ok else np.zeros(0, np.int32))
        self.window_from = max(0, len(self) - self.model.n_swa) if ok and self.model.n_swa else 0
        return ok

    def state(self) -> memoryview:
        """The sequence's state in llama.cpp's byte layout."""
        return self.model.get_state(self.seq_id)

    def copy_from(self, other: "Sequence") -> None:
        """Hold what `other` (a sequence of the same context) holds, copied within the
        context (no state bytes through Python; with a KV stream per sequence llama.cpp
        copies the cells between streams, at the next decode): a second answer to the same
        prompt starts from the first one's KV."""
        self.model.forget_from(0, self.seq_id)
        llama_cpp.llama_memory_seq_cp(self.model.memory, other.seq_id, self.seq_id, -1, -1)
        self._hold(other.tokens.copy())
        self.window_from = other.window_from

    # -- computing alone ----------------------------------------------------------

    def prefill(self, tokens) -> None:
        """Compute the KV of `tokens` after those held, in batches (logits for the last)."""
        if len(tokens):
            tokens = np.asarray(tokens, np.int32)
            self._decoder.prefill(tokens.tolist(), len(self))
            self._hold(np.concatenate([self.tokens, tokens]))

    def step(self, token: int) -> None:
        """Compute one token after those held, with its logits (the hot loop of a drafter)."""
        self._decoder.step(token, len(self))
        self._more.append(int(token))

    def verify(self, tokens) -> None:
        """Compute `tokens` after those held in one batch, with logits at every one."""
        self._decoder.verify(tokens, len(self))
        self._hold(np.concatenate([self.tokens, np.asarray(tokens, np.int32)]))

    # -- computing in a shared pass -----------------------------------------------

    def queue(self, batch: MultiBatch, tokens: "list[int]", logits: str = "last") -> int:
        """Put `tokens`, to follow those held, into `batch`; logits at the "last" of them,
        at "all", or "none". The batch index of the first row with logits."""
        self._queued = tokens
        return batch.add(self.seq_id, tokens, len(self), logits)

    def settle(self, kept: "int | None" = None) -> None:
        """The batch was decoded: of the tokens queued, the first `kept` (default all) are
        held; the cells of the others are dropped."""
        queued, self._queued = self._queued, []
        kept = len(queued) if kept is None else kept
        self._more.extend(queued[:kept])
        if kept < len(queued):
            self.model.forget_from(len(self), self.seq_id)

    def abandon(self) -> None:
        """The batch failed or was stopped: what was queued is not held (a stopped pass
        may have written some of its cells)."""
        if self._queued:
            self._queued = []
            self.model.forget_from(len(self), self.seq_id)

    def close(self) -> None:
        self._decoder.close()
