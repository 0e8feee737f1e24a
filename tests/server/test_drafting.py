"""Speculative decoding inside the server: every slot drafts where it pays, its guesses verified
in the pass it shares with the other requests, and greedy answers are the undrafted ones, alone
or batched.

SmolLM2 (the default model) computes a token alike in any batch (docs/server.md: several clients at once), so the
answers must be equal token for token; the figures each reply carries say drafting happened.
"""

from concurrent.futures import ThreadPoolExecutor

import pytest

from engine.decode.draft_policy import PAUSE_MIN

from .conftest import Server

pytestmark = pytest.mark.usefixtures("pinned_draft_costs")   # how much is drafted, not the load

CODE = "\n".join(f"def area_{i}(width, height):\n    return width * height + {i}" for i in range(6))
EDIT = f"Rename width to w in this code and show all of it:\n```python\n{CODE}\n```"
PROMPTS = [EDIT, "Name a colour.", "What is tea?", "Say hello in French."]
TOKENS = 96   # into the code the edit repeats, well past the policy's first pause (PAUSE_MIN tokens)


def ask(server: Server, prompt: str) -> dict:
    return server.chat([{"role": "user", "content": prompt}], max_tokens=TOKENS)


def text(reply: dict) -> str:
    return reply["choices"][0]["message"]["content"]


def test_greedy_answers_drafted_in_the_server_equal_the_undrafted_alone_and_under_4_clients(
        start_server, tmp_path):
    assert TOKENS > 2 * PAUSE_MIN
    plain = start_server("--parallel", 1, "--draft", "off", db=tmp_path / "plain.db")
    undrafted = [text(ask(plain, p)) for p in PROMPTS]       # one client, one at a time
    plain.stop()

    server = start_server("--parallel", 4, "--draft", "lookup", db=tmp_path / "drafted.db")
    alone = ask(server, EDIT)
    spec = alone["chatdb"]["speculative"]
    assert spec["mode"] == "lookup" and spec["accepted"] > 0   # the edit repeats the code
    assert spec["target_forwards"] < alone["usage"]["completion_tokens"]
    assert text(alone) == undrafted[0]

    with ThreadPoolExecutor(len(PROMPTS)) as pool:
        together = list(pool.map(lambda p: ask(server, p), PROMPTS))
    assert [text(r) for r in together] == undrafted
    assert max(r["chatdb"]["batch"]["most_sequences"] for r in together) >= 2
    # In the shared batch a slot drafts only at lengths that pay beside the others (a drafted
    # row there costs most of a token: draft_policy.shared_cost), so how much it drafted
    # depends on how long it ran alone; tests/engine/test_speculative.py tests that rule.
