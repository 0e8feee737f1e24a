"""The response bodies of /v1/chat/completions: a whole completion, or its stream chunks."""

import time
import uuid

from engine.decode.modes import Finish
from engine.prompt.tool_format import split_calls

from .tool_stream import new_call_id

# The engine's finish, as OpenAI's finish_reason.
FINISH = {Finish.STOP: "stop", Finish.LENGTH: "length", Finish.CONTEXT: "length",
          Finish.CANCELLED: "stop"}


class Completion:
    """One response's identity, shared by its chunks (or its single body)."""

    def __init__(self, model: str, prefix: str = "chatcmpl-"):
        self.id = prefix + uuid.uuid4().hex
        self.created = int(time.time())
        self.model = model

    def head(self, obj: str) -> dict:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model,
                "system_fingerprint": None}

    def whole(self, outcomes: list, takes_calls: bool, logprobs: bool) -> dict:
        choices = [_choice(i, o.result, takes_calls, logprobs) for i, o in enumerate(outcomes)]
        return {**self.head("chat.completion"), "choices": choices, "usage": usage(outcomes),
                "chatdb": chatdb_fields(outcomes)}

    def chunk(self, delta: dict, finish: "str | None" = None, index: int = 0,
              logprobs: "list | None" = None) -> dict:
        return {**self.head("chat.completion.chunk"),
                "choices": [{"index": index, "delta": delta,
                             "logprobs": {"content": logprobs, "refusal": None} if logprobs else None,
                             "finish_reason": finish}]}

    def usage_chunk(self, outcomes: list) -> dict:
        return {**self.head("chat.completion.chunk"), "choices": [], "usage": usage(outcomes),
                "chatdb": chatdb_fields(outcomes)}


def finish_reason(result, called: bool) -> str:
    """tool_calls where calls were made, unless the answer was cut short (length)."""
    finish = FINISH.get(result.finish, "stop")
    return "tool_calls" if called and finish != "length" else finish


def _choice(index: int, result, takes_calls: bool, logprobs: bool) -> dict:
    text, calls = split_calls(result.text) if takes_calls else (result.text, [])
    message = {"role": "assistant", "content": text if text or not calls else None}
    if calls:
        message["tool_calls"] = [{"id": new_call_id(), "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments}}
                                 for c in calls]
    entries = {"content": [logprob_entry(e) for e in result.logprobs], "refusal": None}
    return {"index": index, "message": message, "logprobs": entries if logprobs else None,
            "finish_reason": finish_reason(result, bool(calls))}


def logprob_entry(entry) -> dict:
    """One token's, as OpenAI gives it: its text, bytes, logprob, and the top alternatives."""
    piece, logprob, top = entry
    return {**_token(piece, logprob), "top_logprobs": [_token(p, lp) for p, lp in top]}


def _token(piece: bytes, logprob: float) -> dict:
    return {"token": piece.decode("utf-8", errors="replace"), "logprob": logprob,
            "bytes": list(piece)}


def usage(outcomes: list) -> dict:
    """OpenAI's usage; cached_tokens are the prompt tokens whose KV was restored, not computed.
    Several answers to one prompt count its tokens once."""
    first = outcomes[0].result
    completion = sum(o.result.completion_tokens for o in outcomes)
    return {"prompt_tokens": first.prompt_tokens, "completion_tokens": completion,
            "total_tokens": first.prompt_tokens + completion,
            "prompt_tokens_details": {"cached_tokens": first.restored_tokens}}


def chatdb_fields(outcomes: list) -> dict:
    """Where the answer went in the archive and how its prompt was obtained."""
    r, p = outcomes[0].result, outcomes[0].placement
    fields = {"conversation_id": r.conversation_id, "message_id": r.message_id,
              "reused_messages": p.reused, "added_messages": len(p.path) - p.reused,
              "kv_source": r.kv_source, "restored_tokens": r.restored_tokens,
              "computed_tokens": r.computed_tokens, "status": r.status,
              "batch": outcomes[0].batch, "speculative": r.speculative,
              "window": {"first_message_id": r.window_first,
                         "left_out_messages": r.left_out_messages}}
    if len(outcomes) > 1:
        fields["message_ids"] = [o.result.message_id for o in outcomes]
        fields["speculative_each"] = [o.result.speculative for o in outcomes]
    return fields


def headers(outcomes: list) -> dict:
    r = outcomes[0].result
    return {"x-chatdb-conversation": str(r.conversation_id),
            "x-chatdb-restored-tokens": str(r.restored_tokens),
            "x-chatdb-kv-source": r.kv_source}
