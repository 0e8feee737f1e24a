"""An answer's tokens as they are sampled: its text streamed, and when it ends.

Text is streamed through an incremental UTF-8 decoder, so a character split
across tokens is printed whole. An answer ends at an end-of-generation
token, a stop string or turn marker written as text (never streamed), its
max_tokens, or a cancellation, checked at every token: what was generated
is kept. The slot that samples the tokens (engine/batching/slot.py) says
when the context is full.
"""

import codecs
import time
from dataclasses import dataclass, field

from ..llama.model import Model
from ..llama.sampling import TokenLogprob
from .modes import Finish
from .stop_strings import StopText


@dataclass
class Generation:
    tokens: list[int] = field(default_factory=list)   # as sampled, an end token included
    text: str = ""
    finish: Finish = Finish.STOP
    first_token_at: "float | None" = None
    last_token_at: "float | None" = None
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

    @property
    def left(self) -> int:
        """Tokens the answer may still have before its max_tokens."""
        return self.max_tokens - len(self.out.tokens)

    def emit(self, token: int, logprob: "TokenLogprob | None" = None) -> bool:
        """Record one token (and its log-probabilities, where asked); True when
        generation must stop after it."""
        out = self.out
        out.last_token_at = time.perf_counter()
        if out.first_token_at is None:
            out.first_token_at = out.last_token_at
        out.tokens.append(token)
        if self.model.is_eog(token):   # an end token writes nothing
            return self.end(Finish.STOP)
        if logprob is not None:
            self._logprob(logprob)
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
