"""One llama_batch holding tokens of several sequences, decoded in one forward pass.

Each step of the slots (engine/batching) fills it with what every busy
sequence computes next: a generated token and its drafted guesses, or a
chunk of a prompt; then decodes it once. `most_sequences` records the most
sequences one decode has held (what the server reports, so a client can
tell its request really shared a pass).

A decode can be stopped (Ctrl-C) within one graph node, not one pass:
llama.cpp's abort callback asks `abort()` between nodes (a Python signal
handler runs inside that call, since it comes on the calling thread). It is
installed only for the passes given one, and stays installed while the
next pass is given the same: asking per node would slow the one-token steps.
"""

import llama_cpp

from ..errors import Cancelled, EngineError
from .model import caught_errors

LLAMA_DECODE_ABORTED = 2
LLAMA_DECODE_NO_MEMORY = -2   # a buffer of the pass could not be allocated (a GPU's memory full)
# (the variable engine.machine.offload_plan reads: named here, below which the plan is made)
GPU_MEMORY_ENV = "CHATDB_GPU_MEMORY"


def decode_failed(status: int, said: str = "") -> EngineError:
    """llama_decode's failure as the user reads it, with what to do about it."""
    if status == LLAMA_DECODE_NO_MEMORY:
        why = (f"out of memory for the pass (on a GPU: its memory is full); set {GPU_MEMORY_ENV} "
               "lower to keep fewer layers on it, or give a smaller --ctx")
    else:
        why = "the context may be full"
    return EngineError(f"llama_decode failed (status {status}): {why}" + (f" ({said})" if said else ""))


class MultiBatch:
    def __init__(self, model, capacity: int):
        self.model, self.capacity = model, capacity
        self.batch = llama_cpp.llama_batch_init(capacity, 0, 1)
        self.batch.n_tokens = 0
        self.sequences: set[int] = set()     # in the batch being filled
        self.most_sequences = 0
        self.decodes = 0
        self._abort = None                   # the callable the installed callback asks
        self._callback = None                # kept alive while llama.cpp holds it

    @property
    def queued(self) -> int:
        return self.batch.n_tokens

    @property
    def room(self) -> int:
        return self.capacity - self.batch.n_tokens

    def add(self, seq_id: int, tokens, start: int, logits: str = "last") -> int:
        """Queue `tokens` of sequence `seq_id` at positions start..; with logits at the
        "last" of them, at "all" or "none". The batch index of the first row with logits
        (rows with logits follow one another)."""
        b, n = self.batch, self.batch.n_tokens
        every = logits == "all"
        for j, token in enumerate(tokens, n):
            b.token[j], b.pos[j], b.n_seq_id[j], b.logits[j] = token, start + j - n, 1, every
            b.seq_id[j][0] = seq_id
        b.n_tokens = n + len(tokens)
        if logits == "last" and len(tokens):
            b.logits[b.n_tokens - 1] = True
        if len(tokens):
            self.sequences.add(seq_id)
        return n if every else b.n_tokens - 1

    def decode(self, abort=None) -> int:
        """Decode what was queued, then start empty; how many sequences it held.

        `abort`: a callable asked between graph nodes; Cancelled if it turns true (the
        pass is then not done, its sequences' cells undefined: Sequence.abandon)."""
        if self.batch.n_tokens == 0:
            return 0
        held, errors = len(self.sequences), []
        self._abortable(abort)
        try:
            if abort is None:
                rc = llama_cpp.llama_decode(self.model.ctx, self.batch)
            else:
                with caught_errors() as errors:  # an abort makes llama.cpp log three error lines
                    rc = llama_cpp.llama_decode(self.model.ctx, self.batch)
        finally:
            self.most_sequences = max(self.most_sequences, held)
            self.batch.n_tokens = 0
            self.sequences = set()
        self.decodes += 1
        if rc == LLAMA_DECODE_ABORTED and abort is not None:
            raise Cancelled()
        if rc != 0:
            raise decode_failed(rc, " ".join(" ".join(errors).split()))
        return held

    def _abortable(self, abort) -> None:
        """Install the abort callback for `abort`, or take it away for None."""
        if abort is self._abort:
            return
        if abort is None:
            llama_cpp.llama_set_abort_callback(self.model.ctx, llama_cpp.ggml_abort_callback(),
                                               None)
            self._callback = None
        else:
            self._callback = llama_cpp.ggml_abort_callback(lambda data: bool(abort()))
            llama_cpp.llama_set_abort_callback(self.model.ctx, self._callback, None)
        self._abort = abort

    def close(self) -> None:
        if self.batch is not None:
            self._abortable(None)
            llama_cpp.llama_batch_free(self.batch)
            self.batch = None
