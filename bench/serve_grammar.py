"""bench/serve.py part 5: decoding under a grammar (response_format json_schema) against
decoding without one, on the same chatdb serve, interleaved.

Both answers are held to the same length (the end-of-turn tokens biased out,
max_tokens fixed), greedy, one at a time; a repeat sends one of each, in
alternating order. The rate is the answer's tokens after the first over the
time from its first streamed text to its last; the ratio is the median of
each repeat's own.
"""

import ctypes
import json
import statistics
import time
from pathlib import Path

import httpx
import llama_cpp

from serve_clients import chatdb_server, settle

from engine.llama.model import _quiet_log

SCHEMA = {"type": "object", "required": ["title", "chapters"], "additionalProperties": False,
          "properties": {"title": {"type": "string"},
                         "chapters": {"type": "array", "items": {
                             "type": "object", "required": ["name", "summary"],
                             "properties": {"name": {"type": "string"},
                                            "summary": {"type": "string"}}}}}}
PROMPT = "Write a long story about a lighthouse keeper, with many chapters."


def end_tokens(model: str) -> dict:
    """logit_bias keeping the model's end-of-generation tokens out (its vocabulary only is
    read), so that every answer runs to max_tokens."""
    llama_cpp.llama_log_set(_quiet_log, ctypes.c_void_p(0))
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    loaded = llama_cpp.llama_model_load_from_file(model.encode(), params)
    try:
        vocab = llama_cpp.llama_model_get_vocab(loaded)
        return {str(t): -100 for t in range(llama_cpp.llama_vocab_n_tokens(vocab))
                if llama_cpp.llama_vocab_is_eog(vocab, t)}
    finally:
        llama_cpp.llama_model_free(loaded)


def grammar_against_plain(args, work: Path, model: str) -> None:
    print(f"\n5. decode tokens/s under a grammar (json_schema) against none, {args.tokens} tokens"
          f" each (median of {args.repeat}; ratio: median of each repeat's own)")
    rates = {"plain": [], "grammar": []}
    no_end = end_tokens(model)
    with chatdb_server(work / "grammar.db", work, 1, args.threads) as server:
        for r in range(args.repeat):
            order = ["plain", "grammar"] if r % 2 == 0 else ["grammar", "plain"]
            for kind in order:
                settle(server.base)
                rates[kind].append(_rate(server.base, kind, args.tokens, r, no_end))
    ratio = statistics.median(g / p for g, p in zip(rates["grammar"], rates["plain"]))
    print(f"{'plain':>10} {'grammar':>10} {'grammar/plain':>14}")
    print(f"{statistics.median(rates['plain']):>10.1f} {statistics.median(rates['grammar']):>10.1f}"
          f" {ratio:>13.2f}x  (target 0.9x or better: {'met' if ratio >= 0.9 else 'MISSED'})")
    print("each repeat's grammar/plain: " + " ".join(
        f"{g / p:.2f}" for g, p in zip(rates["grammar"], rates["plain"])))


def _rate(base: str, kind: str, tokens: int, repeat: int, no_end: dict) -> float:
    body = {"model": "m", "temperature": 0, "max_tokens": tokens, "logit_bias": no_end,
            "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": f"{PROMPT} ({kind} {repeat})"}]}
    if kind == "grammar":
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "story", "schema": SCHEMA}}
    first = last = None
    count = 0
    with httpx.stream("POST", base + "/v1/chat/completions", json=body, timeout=600) as response:
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[len("data: "):])
            if chunk.get("usage"):
                count = chunk["usage"]["completion_tokens"]
            elif chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
                last = time.perf_counter()
                first = first or last
    return (count - 1) / (last - first) if count > 1 and last > first else 0.0
