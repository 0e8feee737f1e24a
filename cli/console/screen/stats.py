"""The figures: the dim line after each answer, and the session's totals for /stats."""

import math
import statistics
from dataclasses import dataclass, field

from engine.decode.modes import Finish
from engine.kv.modes import KVSource


def duration(ms: float) -> str:
    return f"{ms:,.0f} ms" if ms < 1000 else f"{ms / 1000:,.1f} s"


def context_phrase(r) -> str:
    """How the model came to hold the conversation before answering."""
    new = f", read {r.computed_tokens:,} new" if r.computed_tokens else ""
    if r.kv_source == KVSource.LIVE:
        return f"reused {r.restored_tokens:,} tokens already in memory{new}"
    if r.kv_source == KVSource.MEMORY:
        return f"restored {r.restored_tokens:,} tokens from memory in {duration(r.restore_ms)}{new}"
    if r.kv_source == KVSource.ARCHIVE:
        when = " while you typed" if r.restored_ahead else ""
        return (f"resumed {r.restored_tokens:,} tokens from the archive in "
                f"{duration(r.restore_ms)}{when}{new}")
    return f"read {r.computed_tokens:,} tokens"


def turn_line(r) -> str:
    """`42 tokens · 61.3 tokens/s · first token 180 ms · resumed 3,912 tokens from ...`"""
    parts = [f"{r.completion_tokens:,} tokens", f"{r.decode_tokens_per_s:.1f} tokens/s",
             f"first token {duration(r.ttft_ms)}", context_phrase(r)]
    if r.status == "interrupted":
        parts.append("interrupted: the partial answer is kept")
    elif r.finish == Finish.LENGTH:
        parts.append("stopped at max_tokens (/set max_tokens=N)")
    elif r.finish == Finish.CONTEXT:
        parts.append("stopped: the context is full")
    drafted = getattr(r, "speculative", {}).get("drafted")
    if drafted:
        parts.append(f"{r.speculative['accepted']} of {drafted} drafted tokens accepted")
    if r.left_out_messages:
        parts.append(window_phrase(r))
    return " · ".join(parts)


def window_phrase(r) -> str:
    """`window: messages 12-40 of 40`: what the model saw of the path, numbered as /history
    numbers it (the messages before the first are no longer in its context)."""
    return (f"window: messages {r.left_out_messages + 1}-{r.path_messages} of {r.path_messages} "
            f"({r.left_out_messages} oldest left out of the context)")


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile (share in 0..1)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


@dataclass
class Restores:
    count: int = 0
    tokens: int = 0
    ms: list = field(default_factory=list)

    def add(self, tokens: int, ms: float) -> None:
        self.count += 1
        self.tokens += tokens
        self.ms.append(ms)

    def describe(self) -> str:
        if not self.count:
            return "none"
        return (f"{self.count} × {self.tokens:,} tokens in all, median "
                f"{duration(statistics.median(self.ms))}, max {duration(max(self.ms))}")


@dataclass
class SessionStats:
    model_load_s: float = 0.0
    answers: int = 0
    interrupted: int = 0
    tokens: int = 0
    computed_tokens: int = 0
    drafted: int = 0
    accepted: int = 0
    decoded: int = 0               # tokens after each answer's first (those are timed)
    decode_s: float = 0.0
    ttft_ms: list = field(default_factory=list)
    live: Restores = field(default_factory=Restores)
    memory: Restores = field(default_factory=Restores)
    archive: Restores = field(default_factory=Restores)

    def model_loaded(self, seconds: float) -> None:
        self.model_load_s = seconds

    def add(self, r) -> None:
        self.answers += 1
        self.interrupted += r.status == "interrupted"
        self.tokens += r.completion_tokens
        self.computed_tokens += r.computed_tokens
        if r.decode_tokens_per_s > 0 and r.completion_tokens > 1:
            self.decoded += r.completion_tokens - 1
            self.decode_s += (r.completion_tokens - 1) / r.decode_tokens_per_s
        self.ttft_ms.append(r.ttft_ms)
        speculative = getattr(r, "speculative", {})
        self.drafted += speculative.get("drafted") or 0
        self.accepted += speculative.get("accepted") or 0
        source = {KVSource.LIVE: self.live, KVSource.MEMORY: self.memory,
                  KVSource.ARCHIVE: self.archive}.get(r.kv_source)
        if source is not None:
            source.add(r.restored_tokens, r.restore_ms)

    def rate(self) -> float:
        return self.decoded / self.decode_s if self.decode_s else 0.0

    def rows(self) -> list[tuple[str, str]]:
        """(what, figure) for /stats, without the archive's and machine's rows."""
        ttft = (f"median {duration(statistics.median(self.ttft_ms))}, "
                f"p95 {duration(percentile(self.ttft_ms, 0.95))}") if self.ttft_ms else "–"
        answers = f"{self.answers}" + (f" ({self.interrupted} interrupted)" if self.interrupted else "")
        return [
            ("answers", answers),
            ("tokens generated", f"{self.tokens:,}"),
            ("tokens/s", f"{self.rate():.1f}" if self.decode_s else "–"),
            ("first token", ttft),
            ("context reused in place", self.live.describe()),
            ("KV restored from memory", self.memory.describe()),
            ("KV restored from archive", self.archive.describe()),
            ("tokens read (prefill)", f"{self.computed_tokens:,}"),
            ("speculative decoding", f"{self.accepted:,} of {self.drafted:,} drafted tokens "
                                     f"accepted" if self.drafted else "no tokens drafted"),
            ("model load", f"{self.model_load_s:.2f} s"),
        ]
