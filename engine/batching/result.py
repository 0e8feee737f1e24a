"""What a turn tells its caller: the answer, its ids, and how it was computed."""

import time
from dataclasses import dataclass, field

from ..decode.stream import Generation


@dataclass(frozen=True)
class TurnResult:
    conversation_id: "int | None"    # None: a completion, not in the archive
    user_message_id: "int | None"    # the question answered (None: not a user message)
    message_id: "int | None"
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

    @classmethod
    def of(cls, conversation_id, user_message_id, message_id, gen: Generation, figures,
           prompt_tokens: int, started: float, warnings: list,
           left_out_messages: int = 0) -> "TurnResult":
        """The result of an answer `gen`, whose turn began at `started` (perf_counter) and
        whose slot reported `figures` (job.SlotFigures)."""
        end = time.perf_counter()
        restored = figures.restored
        return cls(
            conversation_id=conversation_id, user_message_id=user_message_id,
            message_id=message_id, text=gen.text, status=gen.status, finish=gen.finish,
            prompt_tokens=prompt_tokens, completion_tokens=len(gen.tokens),
            restored_tokens=restored.restored_tokens, kv_source=restored.source,
            computed_tokens=figures.computed_tokens, restore_ms=round(restored.restore_ms, 2),
            ttft_ms=round(((gen.first_token_at or end) - started) * 1000, 2),
            decode_tokens_per_s=round(gen.decode_tokens_per_s, 2),
            total_ms=round((end - started) * 1000, 2),
            left_out_messages=left_out_messages, restored_ahead=restored.ahead,
            warnings=list(warnings), speculative=dict(figures.speculative), logprobs=gen.logprobs)
