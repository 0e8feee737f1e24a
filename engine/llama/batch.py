"""One llama_batch holding tokens of several sequences, decoded in one forward pass.

Each step of continuous batching fills it with one token of every decoding
sequence and chunks of the prompts still being read, then decodes it once.
`most_sequences` records the most sequences one decode has held (what the
server reports, so a client can tell its request really shared a pass).
"""

import llama_cpp

from ..errors import EngineError


class MultiBatch:
    def __init__(self, model, capacity: int):
        self.model, self.capacity = model, capacity
        self.batch = llama_cpp.llama_batch_init(capacity, 0, 1)
        self.batch.n_tokens = 0
        self.sequences: set[int] = set()     # in the batch being filled
        self.most_sequences = 0
        self.decodes = 0

    @property
    def queued(self) -> int:
        return self.batch.n_tokens

    @property
    def room(self) -> int:
        return self.capacity - self.batch.n_tokens

    def add(self, seq_id: int, tokens, start: int, logits_last: bool) -> int:
        """Queue `tokens` of sequence `seq_id` at positions start..; the batch index of
        the last one (where its logits will be, if asked for)."""
        b, n = self.batch, self.batch.n_tokens
        for j, token in enumerate(tokens):
            b.token[n + j], b.pos[n + j], b.n_seq_id[n + j], b.logits[n + j] = token, start + j, 1, False
            b.seq_id[n + j][0] = seq_id
        b.n_tokens = n + len(tokens)
        if logits_last and len(tokens):
            b.logits[b.n_tokens - 1] = True
        if len(tokens):
            self.sequences.add(seq_id)
        return b.n_tokens - 1

    def decode(self) -> int:
        """Decode what was queued, then start empty; how many sequences it held."""
        if self.batch.n_tokens == 0:
            return 0
        held = len(self.sequences)
        try:
            rc = llama_cpp.llama_decode(self.model.ctx, self.batch)
        finally:
            self.most_sequences = max(self.most_sequences, held)
            self.batch.n_tokens = 0
            self.sequences = set()
        self.decodes += 1
        if rc != 0:
            raise EngineError(f"llama_decode failed (status {rc}): the context may be full")
        return held

    def close(self) -> None:
        if self.batch is not None:
            llama_cpp.llama_batch_free(self.batch)
            self.batch = None
