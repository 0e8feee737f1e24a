"""The decode loop: sample, stream text, step, until an end-of-generation token.

Text is streamed through an incremental UTF-8 decoder, so a character split
across tokens is printed whole. Cancellation is checked at every token and
keeps what was generated.
"""

import codecs
import time
from dataclasses import dataclass, field

from .kvcache import KVCache
from .model import Model
from .sampling import Sampler


@dataclass
class Generation:
    tokens: list[int] = field(default_factory=list)   # as sampled, an end token included
    text: str = ""
    finish: str = "stop"        # stop | length | cancelled | context
    first_token_at: "float | None" = None
    last_token_at: "float | None" = None

    @property
    def decode_tokens_per_s(self) -> float:
        if self.first_token_at is None or len(self.tokens) < 2:
            return 0.0
        elapsed = self.last_token_at - self.first_token_at
        return (len(self.tokens) - 1) / elapsed if elapsed > 0 else 0.0


def generate(model: Model, cache: KVCache, sampler: Sampler, max_tokens: int,
             on_text=None, cancelled=None) -> Generation:
    """Generate after the live context. Every token but the last sampled is decoded."""
    out = Generation()
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pieces = []
    position = len(cache.live)
    decoded = []
    try:
        _loop(model, cache, sampler, max_tokens, on_text, cancelled, out, utf8, pieces, decoded)
    finally:
        cache.mark_decoded(decoded)  # keep the cache's token list true to the KV, whatever happens
    tail = utf8.decode(b"", final=True)
    if tail:
        pieces.append(tail)
        if on_text is not None:
            on_text(tail)
    out.text = "".join(pieces)
    return out


def _loop(model, cache, sampler, max_tokens, on_text, cancelled, out, utf8, pieces, decoded):
    position = len(cache.live)
    for _ in range(max_tokens):
        if cancelled is not None and cancelled():
            out.finish = "cancelled"
            break
        token = sampler.sample(model.ctx)
        out.last_token_at = time.perf_counter()
        if out.first_token_at is None:
            out.first_token_at = out.last_token_at
        out.tokens.append(token)
        if model.is_eog(token):
            break
        text = utf8.decode(model.piece(token))
        if text:
            pieces.append(text)
            if on_text is not None:
                on_text(text)
        if position + 1 >= model.n_ctx:
            out.finish = "context"
            break
        cache.decoder.step(token, position)
        decoded.append(token)
        position += 1
    else:
        out.finish = "length"
