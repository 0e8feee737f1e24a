"""One sequence of a shared context and the turn it answers (scheduler.py schedules them).

A slot's turn goes through: its prompt restored (KVCache.restore, as the
console does, computing nothing), its `pending` prompt tokens fed by the
shared batch in chunks, then one token per step until its answer ends.
Another answer to the same prompt (n > 1) waits in a slot of its own,
`following` the one that reads the prompt, and when that one has read it
copies its KV and samples from the same logits.
"""

import time
from dataclasses import dataclass, field, replace

import numpy as np

from ..decode.generate import Generation, Stream
from ..decode.modes import Finish
from ..kv.cache import Acquired, KVCache
from ..llama.sampling import Sampler
from ..llama.sequence import Sequence


@dataclass
class Slot:
    cache: KVCache
    turn: object = None              # turn_request.TurnRequest
    placement: object = None         # chatdb.message_match.Placement
    parts: object = None             # turn_result.TurnParts
    prepared: object = None          # prepared.Prepared
    acquired: "Acquired | None" = None
    pending: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    capture_at: "int | None" = None  # the question's end, where a sliding-window state is kept
    sampler: "Sampler | None" = None
    stream: "Stream | None" = None
    next_token: int = -1             # sampled, to be fed at the next step
    logits_at: int = -1              # batch index of this slot's logits in the step
    compute_started: float = 0.0
    figures: dict = field(default_factory=dict)   # how the turn was batched (passed)
    following: "Slot | None" = None  # the slot reading the prompt this one answers too

    @property
    def seq(self) -> Sequence:
        return self.cache.seq

    @property
    def free(self) -> bool:
        return self.turn is None

    @property
    def generating(self) -> bool:
        return self.turn is not None and not len(self.pending) and self.following is None

    @property
    def reading(self) -> bool:
        return self.turn is not None and bool(len(self.pending)) and self.following is None

    def begin(self, turn, placement, parts, prepared, acquired, model, markers: list[str]) -> None:
        """Take a turn whose prompt `acquired` restored (the rest is `pending`); `markers`:
        the model's turn markers, which end an answer written as text."""
        self.turn, self.placement, self.parts, self.prepared = turn, placement, parts, prepared
        self.acquired = acquired
        self.figures = {"most_sequences": 0, "prompt_passes": 0, "prompt_least_sequences": 0,
                        "sequence": self.seq.seq_id}
        self.pending = prepared.prompt[acquired.restored_tokens:]
        boundary = prepared.question_end
        self.capture_at = (boundary if self.cache.captures
                           and acquired.restored_tokens < boundary < len(prepared.prompt) else None)
        self.compute_started = time.perf_counter()
        self._answer(turn, model, markers)

    def follow(self, turn, leader: "Slot", model, markers: list[str]) -> None:
        """Take another answer to `leader`'s prompt: it starts when the leader has read it."""
        self.turn, self.placement, self.parts = turn, leader.placement, leader.parts
        self.prepared, self.following = leader.prepared, leader
        self.figures = {"most_sequences": 0, "prompt_passes": 0, "prompt_least_sequences": 0,
                        "sequence": self.seq.seq_id}
        self.compute_started = leader.compute_started
        self._answer(turn, model, markers)

    def take_prompt(self) -> None:
        """The leader has read the prompt: hold its KV and sample from its logits."""
        leader, self.following = self.following, None
        self.seq.copy_from(leader.seq)
        self.acquired = replace(leader.acquired)
        self.logits_at = leader.logits_at
        self.figures.update(prompt_passes=leader.figures["prompt_passes"],
                            prompt_least_sequences=leader.figures["prompt_least_sequences"])

    def _answer(self, turn, model, markers: list[str]) -> None:
        settings = turn.sampling
        self.sampler = Sampler(settings, model.n_vocab, model.vocab)
        if settings.penalised:
            self.sampler.accept(self.prepared.prompt[-settings.repeat_last_n:].tolist())
        self.stream = Stream(model, settings.max_tokens, turn.on_text, turn.cancelled.is_set,
                             list(turn.stop) + markers, turn.on_logprob)

    def passed(self, sequences: int, reading: bool) -> None:
        """A forward pass holding `sequences` sequences fed this turn's prompt or a token."""
        f = self.figures
        f["most_sequences"] = max(f["most_sequences"], sequences)
        if reading:
            f["prompt_passes"] += 1
            least = f["prompt_least_sequences"]
            f["prompt_least_sequences"] = min(least, sequences) if least else sequences

    def chunk(self, most: int) -> np.ndarray:
        """The next prompt tokens to feed, at most `most`, not past the capture point."""
        if self.capture_at is not None:
            most = min(most, self.capture_at - len(self.seq.tokens))
        return self.pending[:most]

    def fed(self, part: np.ndarray) -> None:
        """`part` of the prompt was decoded."""
        self.seq.mark_decoded(part.tolist())
        self.pending = self.pending[len(part):]
        if self.capture_at is not None and len(self.seq.tokens) == self.capture_at:
            self.cache.capture(self.capture_at)
            self.capture_at = None

    def sample(self, ctx, n_ctx: int) -> bool:
        """Sample the next token from this step's logits; True when the answer has ended."""
        token = self.sampler.sample(ctx, self.logits_at)
        if self.stream.emit(token, self.sampler.last):
            return True
        if len(self.seq.tokens) + 1 >= n_ctx:
            return self.stream.end(Finish.CONTEXT)
        self.next_token = token
        return False

    def generation(self) -> Generation:
        """The answer as it ended; the sequence holds its tokens but the last one."""
        gen = self.stream.close()
        if self.stream.cut is not None:   # a stop string: its tokens are not the answer's
            self.cache.truncate(len(self.prepared.prompt) + len(gen.tokens))
        first = gen.first_token_at or time.perf_counter()   # the prompt's computing ends there
        self.acquired.compute_ms = (first - self.compute_started) * 1000
        return gen

    def release(self) -> None:
        if self.sampler is not None:
            self.sampler.close()
        self.turn = self.placement = self.parts = self.prepared = self.acquired = None
        self.sampler = self.stream = self.following = None
        self.capture_at = None
        self.pending = np.zeros(0, np.int32)
