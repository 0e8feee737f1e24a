"""bench/serve.py part 5: decoding under a grammar (response_format json_schema) against
decoding without one, on the same chatdb serve, interleaved.

Both answers are held to the same length (the end-of-turn tokens biased out,
max_tokens fixed), greedy, one at a time; a repeat sends one of each, in
alternating order. The rate is the answer's tokens after the first over the
time from its first streamed text to its last; the ratio is the median of
each repeat's own.
"""

import json
import statistics
import time
from pathlib import Path

import httpx

from serve_clients import chatdb_server, settle

NO_END = {"0": -100, "1": -100, "2": -100}   # SmolLM2's end tokens: every answer runs to max_tokens
SCHEMA = {"type": "object", "required": ["title", "chapters"], "additionalProperties": False,
          "properties": {"title": {"type": "string"},
                         "chapters": {"type": "array", "items": {
                             "type": "object", "required": ["name", "summary"],
                             "properties": {"name": {"type": "string"},
                                            "summary": {"type": "string"}}}}}}
PROMPT = "Write a long story about a lighthouse keeper, with many chapters."


def grammar_against_plain(args, work: Path) -> None:
    print(f"\n5. decode tokens/s under a grammar (json_schema) against none, {args.tokens} tokens"
          f" each (median of {args.repeat}; ratio: median of each repeat's own)")
    rates = {"plain": [], "grammar": []}
    with chatdb_server(work / "grammar.db", work, 1, args.threads) as server:
        for r in range(args.repeat):
            order = ["plain", "grammar"] if r % 2 == 0 else ["grammar", "plain"]
            for kind in order:
                settle(server.base)
                rates[kind].append(_rate(server.base, kind, args.tokens, r))
    ratio = statistics.median(g / p for g, p in zip(rates["grammar"], rates["plain"]))
    print(f"{'plain':>10} {'grammar':>10} {'grammar/plain':>14}")
    print(f"{statistics.median(rates['plain']):>10.1f} {statistics.median(rates['grammar']):>10.1f}"
          f" {ratio:>13.2f}x  (target 0.9x or better: {'met' if ratio >= 0.9 else 'MISSED'})")
    print("each repeat's grammar/plain: " + " ".join(
        f"{g / p:.2f}" for g, p in zip(rates["grammar"], rates["plain"])))


def _rate(base: str, kind: str, tokens: int, repeat: int) -> float:
    body = {"model": "m", "temperature": 0, "max_tokens": tokens, "logit_bias": NO_END,
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
