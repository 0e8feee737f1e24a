"""One sequence of a llama.cpp context: its KV cells and the tokens they hold.

Every change to the sequence's KV goes through here, so `tokens` is always
what the context holds for it. A context may hold several sequences (one
per request of a server); each has its own `Sequence`, and positions and
cells are per sequence.
"""

import llama_cpp
import numpy as np

from ..errors import Cancelled
from .decoder import Decoder
from .model import Model


class Sequence:
    def __init__(self, model: Model, seq_id: int = 0):
        self.model, self.seq_id = model, seq_id
        self.decoder = Decoder(model, seq_id)
        self.tokens = np.zeros(0, np.int32)   # the tokens whose KV the sequence holds

    def keep(self, n: int) -> None:
        """Keep the KV of the first `n` tokens only; a recurrent state, which cannot be cut
        back, is dropped whole instead (then fewer than `n` tokens are held)."""
        if not self.model.forget_from(n, self.seq_id):
            self.model.forget_from(0, self.seq_id)
            n = 0
        self.tokens = self.tokens[:n]

    def load(self, state, tokens: np.ndarray) -> bool:
        """Replace the KV with `state`, which holds `tokens`; False if llama.cpp refused it
        (the sequence is then empty)."""
        ok = self.model.set_state(state, self.seq_id)
        self.tokens = np.array(tokens, np.int32) if ok else np.zeros(0, np.int32)
        return ok

    def copy_from(self, other: "Sequence") -> None:
        """Hold what `other` holds, copied within the context (no state bytes through Python;
        with a KV stream per sequence llama.cpp copies the cells between streams)."""
        self.model.forget_from(0, self.seq_id)
        llama_cpp.llama_memory_seq_cp(self.model.memory, other.seq_id, self.seq_id, -1, -1)
        self.tokens = other.tokens.copy()

    def state(self) -> memoryview:
        """The sequence's state in llama.cpp's byte layout."""
        return self.model.get_state(self.seq_id)

    def prefill(self, tokens, progress=None, cancelled=None) -> None:
        """Compute the KV of `tokens` after those held (logits ready for the last one).

        Cancelled if `cancelled()` turns true meanwhile; the tokens computed by then stay held.
        """
        if len(tokens):
            tokens = np.asarray(tokens, np.int32)
            try:
                self.decoder.prefill(tokens.tolist(), len(self.tokens), progress, cancelled)
            except Cancelled as stop:
                self.tokens = np.concatenate([self.tokens, tokens[:stop.done]])
                raise
            self.tokens = np.concatenate([self.tokens, tokens])

    def mark_decoded(self, tokens: list[int]) -> None:
        """Record tokens the decode loop has fed to the model itself."""
        if tokens:
            self.tokens = np.concatenate([self.tokens, np.asarray(tokens, np.int32)])

    def close(self) -> None:
        self.decoder.close()
