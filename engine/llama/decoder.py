"""Feeding tokens to the model: batched prefill and one-token steps.

The position of every token is its index in the sequence; the caller keeps
`Model`'s KV and its own list of tokens in step.

A prefill can be stopped (Ctrl-C) within one graph node, not one batch:
llama.cpp's abort callback asks `cancelled` between nodes (a Python signal
handler runs inside that call, since it comes on the calling thread). It is
set for prefills only: asking per node would slow the one-token steps.
"""

from contextlib import contextmanager

import llama_cpp

from ..errors import Cancelled, EngineError
from .model import Model, caught_errors

LLAMA_DECODE_ABORTED = 2


class Decoder:
    """Decodes into one sequence of the model's context (seq_id)."""

    def __init__(self, model: Model, seq_id: int = 0):
        self.model, self.seq_id = model, seq_id
        self.n_batch = model.config.n_batch
        self.batch = llama_cpp.llama_batch_init(self.n_batch, 0, 1)
        self._errors: "list[str] | None" = None   # llama.cpp's error lines, while caught

    def prefill(self, tokens, start: int, progress=None, cancelled=None) -> None:
        """Decode `tokens` at positions start.. in batches; logits for the last one only.

        Cancelled (its `done` tokens kept in the KV) if `cancelled()` turns true.
        """
        total = len(tokens)
        done = 0
        with self._abortable(cancelled):
            for size in [min(self.n_batch, total - i) for i in range(0, total, self.n_batch)]:
                if cancelled is not None and cancelled():
                    raise Cancelled(done)
                self._fill(tokens[done: done + size], start + done, last_logits=done + size == total)
                try:
                    self._decode()
                except Cancelled:
                    self.model.forget_from(start + done)  # the batch may be part-computed
                    raise Cancelled(done) from None
                done += size
                if progress:
                    progress(done, total)

    @contextmanager
    def _abortable(self, cancelled):
        if cancelled is None:
            yield
            return
        callback = llama_cpp.ggml_abort_callback(lambda data: bool(cancelled()))
        llama_cpp.llama_set_abort_callback(self.model.ctx, callback, None)
        try:
            with caught_errors() as lines:  # an abort makes llama.cpp log three error lines
                self._errors = lines
                yield
        finally:
            self._errors = None
            llama_cpp.llama_set_abort_callback(self.model.ctx, llama_cpp.ggml_abort_callback(), None)

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
        if rc == LLAMA_DECODE_ABORTED:
            raise Cancelled()
        if rc != 0:
            said = " ".join(" ".join(self._errors or []).split())
            raise EngineError(f"llama_decode failed (status {rc}): the context may be full"
                              + (f" ({said})" if said else ""))

    def close(self) -> None:
        if self.batch is not None:
            llama_cpp.llama_batch_free(self.batch)
            self.batch = None
