"""The decode loop: sample, stream text, step, until an end-of-generation token.

With a drafter, each step may instead verify several guessed tokens in one
forward pass (speculative decoding): the target model's own sampler chain
samples at every drafted position, a guess is kept only while it equals
that sample, and the first differing sample is the next token. Every token
is therefore drawn from the target model's distribution exactly as without
drafting; greedy output is identical. Logits are computed only at the
drafted positions, and sampling runs in llama.cpp, not in Python.

Text is streamed through an incremental UTF-8 decoder, so a character split
across tokens is printed whole. Cancellation is checked at every token and
keeps what was generated.
"""

import codecs
import time
from dataclasses import dataclass, field

from ..kv.cache import KVCache
from ..llama.model import Model
from ..llama.sampling import Sampler, TokenLogprob
from .draft_policy import DraftPolicy
from .modes import Finish
from .stop_strings import StopText


@dataclass
class Generation:
    tokens: list[int] = field(default_factory=list)   # as sampled, an end token included
    text: str = ""
    finish: Finish = Finish.STOP
    first_token_at: "float | None" = None
    last_token_at: "float | None" = None
    drafted: int = 0
    accepted: int = 0
    target_forwards: int = 0
    timings: list = field(default_factory=list)   # (rows, cells, ms) of each forward pass
    stopped_by_text: bool = False   # ended at a stop string or a turn marker written as text
    covered: "int | None" = None   # characters of text the kept tokens spell (None: all of it)
    # Where asked (SamplingSettings.logprobs): each token's (bytes, logprob, [(bytes, logprob)])
    logprobs: list = field(default_factory=list)

    @property
    def status(self) -> str:
        """The answer's status in the archive: a cancelled one is kept, marked interrupted."""
        return "interrupted" if self.finish == Finish.CANCELLED else "complete"

    @property
    def decode_tokens_per_s(self) -> float:
        if self.first_token_at is None or len(self.tokens) < 2:
            return 0.0
        elapsed = self.last_token_at - self.first_token_at
        return (len(self.tokens) - 1) / elapsed if elapsed > 0 else 0.0


class Stream:
    """Collects sampled tokens and streams their text; says when to stop."""

    def __init__(self, model: Model, max_tokens: int, on_text, cancelled, stop=None,
                 on_logprob=None):
        """`stop`: strings that end the answer, the model's turn markers among them
        (written as text, they end it too: turn_markers.py); `on_logprob` hears each
        token's log-probabilities as it is sampled, where they were asked for."""
        self.model, self.max_tokens = model, max_tokens
        self.on_text, self.cancelled, self.on_logprob = on_text, cancelled, on_logprob
        self.stop = StopText(list(stop or []))
        self.ends: list[int] = []      # characters decoded through each token
        self.cut: "int | None" = None  # tokens kept when a stop string ended the answer
        self.out = Generation()
        self.utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.pieces: list[str] = []

    def emit(self, token: int, logprob: "TokenLogprob | None" = None) -> bool:
        """Record one token (and its log-probabilities, where asked); True when
        generation must stop after it."""
        out = self.out
        out.last_token_at = time.perf_counter()
        if out.first_token_at is None:
            out.first_token_at = out.last_token_at
        out.tokens.append(token)
        if logprob is not None and not self.model.is_eog(token):   # an end token writes nothing
            self._logprob(logprob)
        if self.model.is_eog(token):
            return self.end(Finish.STOP)
        if self._piece(self.utf8.decode(self.model.piece(token))):
            out.stopped_by_text = True
            return self.end(Finish.STOP)
        if len(out.tokens) >= self.max_tokens:
            return self.end(Finish.LENGTH)
        if self.cancelled is not None and self.cancelled():
            return self.end(Finish.CANCELLED)
        return False

    def end(self, finish: Finish) -> bool:
        """The answer ends here, for `finish`; True (for emit's callers)."""
        self.out.finish = finish
        return True

    def _logprob(self, choice: TokenLogprob) -> None:
        piece = self.model.piece
        entry = (piece(choice.token), choice.logprob, [(piece(t), lp) for t, lp in choice.top])
        self.out.logprobs.append(entry)
        if self.on_logprob is not None:
            self.on_logprob(entry)

    def _piece(self, text: str) -> bool:
        """Stream one token's text; True if a stop string began (the answer ends before it)."""
        self.ends.append((self.ends[-1] if self.ends else 0) + len(text))
        self._text(self.stop.feed(text))
        if not self.stop.hit:
            return False
        stop_at = sum(len(p) for p in self.pieces)   # what was let through ends where it began
        self.cut = sum(1 for end in self.ends if end <= stop_at)
        return True

    def _text(self, text: str) -> None:
        if text:
            self.pieces.append(text)
            if self.on_text is not None:
                self.on_text(text)

    def close(self) -> Generation:
        if not self.stop.hit:
            self._text(self.stop.feed(self.utf8.decode(b"", final=True)))
            self._text(self.stop.flush())
        self.out.text = "".join(self.pieces)
        if self.cut is not None:  # the stop's tokens are not part of the answer
            self.out.tokens = self.out.tokens[:self.cut]
            self.out.logprobs = self.out.logprobs[:self.cut]
            self.out.covered = self.ends[self.cut - 1] if self.cut else 0
        return self.out


def generate(model: Model, cache: KVCache, sampler: Sampler, max_tokens: int,
             on_text=None, cancelled=None, drafter=None, policy: "DraftPolicy | None" = None,
             clock=time.perf_counter, stop=None) -> Generation:
    """Generate after the live context (whose last token's logits are ready); `clock`
    times each forward pass (Generation.timings); `stop` strings end the answer (the
    turn markers among them: Stream)."""
    stream = Stream(model, max_tokens, on_text, cancelled, stop)
    if max_tokens <= 0 or (cancelled is not None and cancelled()):
        stream.end(Finish.CANCELLED if max_tokens > 0 else Finish.LENGTH)
        return stream.close()
    context = cache.live.tolist()
    start = len(context)
    decoded: list[int] = []
    try:
        _run(model, cache, sampler, stream, context, decoded, drafter, policy or DraftPolicy(),
             clock)
    finally:
        cache.mark_decoded(decoded)  # keep the cache's token list true to the KV, whatever happens
    out = stream.close()
    if stream.cut is not None:
        cache.truncate(start + len(out.tokens))
    return out


def _run(model, cache, sampler, stream, context, decoded, drafter, policy, clock) -> None:
    out, decoder = stream.out, cache.decoder
    position = len(context)
    token = sampler.sample(model.ctx)
    while not stream.emit(token, sampler.last):
        if position + 1 >= model.n_ctx:
            stream.end(Finish.CONTEXT)
            return
        context.append(token)
        room = min(stream.max_tokens - len(out.tokens), model.n_ctx - position - 2)
        k = min(policy.length(position), room) if drafter is not None else 0
        drafts = drafter.propose(context, k) if k > 0 else []
        out.target_forwards += 1
        started = clock()
        if not drafts:
            decoder.step(token, position)
            out.timings.append((1, position, (clock() - started) * 1000))
            decoded.append(token)
            position += 1
            token = sampler.sample(model.ctx)
            continue
        decoder.verify([token] + drafts, position)
        out.timings.append((len(drafts) + 1, position, (clock() - started) * 1000))
        decoded.append(token)
        position += 1
        token, accepted, stop = _accept(sampler, model, stream, drafts, context, decoded)
        position += accepted
        model.forget_from(position, decoder.seq_id)   # the KV of rejected guesses
        out.drafted += len(drafts)
        out.accepted += accepted
        policy.verified(len(drafts), accepted)
        if stop:
            return


def _accept(sampler, model, stream, drafts, context, decoded):
    """Sample at each drafted position; keep guesses while they match."""
    accepted = 0
    for i, guess in enumerate(drafts):
        sampled = sampler.sample(model.ctx, i)
        if sampled != guess:
            return sampled, accepted, False
        accepted += 1
        decoded.append(guess)              # its KV row is valid: it was in the batch
        if stream.emit(guess, sampler.last):
            return None, accepted, True
        context.append(guess)
    return sampler.sample(model.ctx, len(drafts)), accepted, False
