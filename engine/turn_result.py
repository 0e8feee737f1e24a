"""What a turn tells its caller: the answer, its ids, and how it was computed."""

import time
from dataclasses import dataclass, field

from .decode.draft_policy import DraftPolicy
from .decode.generate import Generation
from .kv.cache import Acquired


@dataclass
class TurnResult:
    conversation_id: int
    user_message_id: "int | None"
    message_id: int
    text: str
    status: str
    finish: str
    prompt_tokens: int
    completion_tokens: int
    restored_tokens: int
    kv_source: str
    computed_tokens: int
    restore_ms: float         # for a restore ahead of the turn, not part of ttft_ms
    ttft_ms: float
    decode_tokens_per_s: float
    total_ms: float
    left_out_messages: int = 0
    restored_ahead: bool = False
    warnings: list = field(default_factory=list)
    speculative: dict = field(default_factory=dict)
    logprobs: list = field(default_factory=list)   # Generation.logprobs, where asked


@dataclass
class TurnParts:
    """A turn's parts as the engine gathers them."""
    conversation_id: int
    user_message_id: "int | None"
    started: float            # time.perf_counter() when the turn began
    head: "int | None" = None  # where the turn found or left the head (the answer moves it from there)
    prompt_tokens: int = 0
    left_out_messages: int = 0

    def result(self, message_id: int, gen: Generation, acquired: Acquired, warnings: list,
               speculative: dict) -> TurnResult:
        end = time.perf_counter()
        return TurnResult(
            conversation_id=self.conversation_id, user_message_id=self.user_message_id,
            message_id=message_id, text=gen.text, status=gen.status, finish=gen.finish,
            prompt_tokens=self.prompt_tokens, completion_tokens=len(gen.tokens),
            restored_tokens=acquired.restored_tokens, kv_source=acquired.source,
            computed_tokens=acquired.computed_tokens, restore_ms=round(acquired.restore_ms, 2),
            ttft_ms=round(((gen.first_token_at or end) - self.started) * 1000, 2),
            decode_tokens_per_s=round(gen.decode_tokens_per_s, 2),
            total_ms=round((end - self.started) * 1000, 2),
            left_out_messages=self.left_out_messages, restored_ahead=acquired.ahead,
            warnings=list(warnings), speculative=speculative, logprobs=gen.logprobs)


def raw_result(gen: Generation, acquired: Acquired, prompt_tokens: int, started: float) -> TurnResult:
    """What a completion (a raw prompt, not archived) tells its caller: no ids."""
    parts = TurnParts(None, None, started, prompt_tokens=prompt_tokens)
    return parts.result(None, gen, acquired, [], {})


def speculative_figures(mode: str, gen: Generation, policy: DraftPolicy,
                        draft_kv: "Acquired | None") -> dict:
    """How drafting went in one answer, and how the draft model's KV was obtained."""
    figures = {"mode": mode, "drafted": gen.drafted, "accepted": gen.accepted,
               "acceptance_rate": round(gen.accepted / gen.drafted, 3) if gen.drafted else None,
               "target_forwards": gen.target_forwards, "draft_length": policy.best()[0]}
    if draft_kv is not None:
        figures["draft_kv"] = {"restored_tokens": draft_kv.restored_tokens, "source": draft_kv.source}
    return figures
