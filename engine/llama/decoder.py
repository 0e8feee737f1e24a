"""Feeding tokens of one sequence to the model alone: batched prefill and one-token steps.

The position of every token is its index in the sequence; the caller
(sequence.py) keeps `Model`'s KV and its own list of tokens in step. A pass
shared by several sequences is batch.py's.
"""

import llama_cpp

from .batch import decode_failed
from .model import Model


class Decoder:
    """Decodes into one sequence of the model's context (seq_id)."""

    def __init__(self, model: Model, seq_id: int = 0):
        self.model, self.seq_id = model, seq_id
        self.n_batch = model.config.n_batch
        self.batch = llama_cpp.llama_batch_init(self.n_batch, 0, 1)

    def prefill(self, tokens, start: int) -> None:
        """Decode `tokens` at positions start.. in batches; logits for the last one only."""
        total = len(tokens)
        for done in range(0, total, self.n_batch):
            part = tokens[done: done + self.n_batch]
            self._fill(part, start + done, last_logits=done + len(part) == total)
            self._decode()

    def step(self, token: int, position: int) -> None:
        """Decode one token (the hot loop: no Python lists, one call)."""
        b = self.batch
        b.n_tokens = 1
        b.token[0], b.pos[0], b.n_seq_id[0], b.logits[0] = token, position, 1, True
        b.seq_id[0][0] = self.seq_id
        self._decode()

    def verify(self, tokens, start: int) -> None:
        """Decode tokens at start.. in one batch with logits at every position."""
        b = self.batch
        b.n_tokens = len(tokens)
        for j, token in enumerate(tokens):
            b.token[j], b.pos[j], b.n_seq_id[j], b.logits[j] = token, start + j, 1, True
            b.seq_id[j][0] = self.seq_id
        self._decode()

    def _fill(self, tokens, start: int, last_logits: bool) -> None:
        b = self.batch
        b.n_tokens = len(tokens)
        for j, token in enumerate(tokens):
            b.token[j], b.pos[j], b.n_seq_id[j], b.logits[j] = token, start + j, 1, False
            b.seq_id[j][0] = self.seq_id
        if last_logits and tokens:
            b.logits[len(tokens) - 1] = True

    def _decode(self) -> None:
        rc = llama_cpp.llama_decode(self.model.ctx, self.batch)
        if rc != 0:
            raise decode_failed(rc)

    def close(self) -> None:
        if self.batch is not None:
            llama_cpp.llama_batch_free(self.batch)
            self.batch = None
