"""The response bodies of /v1/chat/completions: a whole completion, or its stream chunks."""

import time
import uuid

FINISH = {"stop": "stop", "length": "length", "context": "length", "cancelled": "stop"}


class Completion:
    """One answer's identity, shared by its chunks (or its single body)."""

    def __init__(self, model: str):
        self.id = "chatcmpl-" + uuid.uuid4().hex
        self.created = int(time.time())
        self.model = model

    def _head(self, obj: str) -> dict:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model,
                "system_fingerprint": None}

    def whole(self, outcome) -> dict:
        result = outcome.result
        return {**self._head("chat.completion"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": result.text},
                             "logprobs": None, "finish_reason": FINISH.get(result.finish, "stop")}],
                "usage": usage(outcome), "chatdb": chatdb_fields(outcome)}

    def chunk(self, delta: dict, finish: "str | None" = None) -> dict:
        return {**self._head("chat.completion.chunk"),
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    def last_chunk(self, outcome) -> dict:
        return self.chunk({}, FINISH.get(outcome.result.finish, "stop"))

    def usage_chunk(self, outcome) -> dict:
        return {**self._head("chat.completion.chunk"), "choices": [], "usage": usage(outcome),
                "chatdb": chatdb_fields(outcome)}


def usage(outcome) -> dict:
    """OpenAI's usage; cached_tokens are the prompt tokens whose KV was restored, not computed."""
    r = outcome.result
    return {"prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens,
            "total_tokens": r.prompt_tokens + r.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": r.restored_tokens}}


def chatdb_fields(outcome) -> dict:
    """Where the answer went in the archive and how its prompt was obtained."""
    r, p = outcome.result, outcome.placement
    return {"conversation_id": r.conversation_id, "message_id": r.message_id,
            "reused_messages": p.reused, "added_messages": len(p.path) - p.reused,
            "kv_source": r.kv_source, "restored_tokens": r.restored_tokens,
            "computed_tokens": r.computed_tokens, "status": r.status,
            "batch": outcome.batch}


def headers(outcome) -> dict:
    r = outcome.result
    return {"x-chatdb-conversation": str(r.conversation_id),
            "x-chatdb-restored-tokens": str(r.restored_tokens),
            "x-chatdb-kv-source": r.kv_source}
