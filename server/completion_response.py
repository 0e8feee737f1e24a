"""The response bodies of /v1/completions (OpenAI's legacy text completions)."""

from .chat_response import FINISH, Completion, usage


def whole(completion: Completion, outcomes: list, prefix: str, logprobs: bool) -> dict:
    return {**completion.head("text_completion"),
            "choices": [choice(i, prefix + o.result.text, o.result, logprobs)
                        for i, o in enumerate(outcomes)],
            "usage": usage(outcomes)}


def choice(index: int, text: str, result, logprobs: bool, finish: "str | None" = "") -> dict:
    return {"text": text, "index": index,
            "logprobs": legacy_logprobs(result.logprobs if result else []) if logprobs else None,
            "finish_reason": FINISH.get(result.finish, "stop") if finish == "" else finish}


def chunk(completion: Completion, index: int, text: str, entries: list, logprobs: bool,
          finish: "str | None" = None) -> dict:
    return {**completion.head("text_completion"),
            "choices": [{"text": text, "index": index,
                         "logprobs": legacy_logprobs(entries) if logprobs else None,
                         "finish_reason": finish}]}


def legacy_logprobs(entries: list, offset: int = 0) -> dict:
    """The completions API's shape: parallel lists of tokens, their logprobs, the top
    alternatives as {token: logprob}, and each token's offset in the text."""
    tokens, offsets, at = [], [], offset
    for piece, _, _ in entries:
        text = piece.decode("utf-8", errors="replace")
        tokens.append(text)
        offsets.append(at)
        at += len(text)
    return {"tokens": tokens, "token_logprobs": [lp for _, lp, _ in entries],
            "top_logprobs": [{p.decode("utf-8", errors="replace"): lp for p, lp in top}
                             for _, _, top in entries],
            "text_offset": offsets}
