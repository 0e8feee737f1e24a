"""bench/speculative_archive.py's bound on any drafter (`best`), on the real model: the
likeliest tokens it reads along an answer, and the speedup of guessing them.

No timing is a pass or a fail: the speedups are the cost model's, not measured."""

import sys
from pathlib import Path

import pytest

from engine.llama.sampling import SamplingSettings

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from speculative_archive import best_guess, likeliest  # noqa: E402

pytestmark = pytest.mark.usefixtures("pinned_draft_costs")   # the built-in cost prior

QUESTION = "Write a short poem about the sea."


def _answered(engine, temperature: float):
    """(the prompt and answer's tokens, the TurnResult) of QUESTION in a new conversation."""
    conv = engine.archive.create_conversation("bound")
    settings = SamplingSettings(temperature=temperature, max_tokens=48, seed=3)
    result = engine.reply(conv.id, QUESTION, sampling=settings)
    return engine.cache.live.tolist(), result


@pytest.fixture
def engine(open_engine):
    return open_engine(draft="off", use_kv=False)[1]


def test_a_greedy_answer_is_its_own_likeliest_tokens_and_every_guess_of_them_holds(engine):
    tokens, result = _answered(engine, 0)
    n_prompt, n = result.prompt_tokens, result.completion_tokens
    assert len(tokens) - n_prompt >= n > 8   # (and the template's end of the turn)
    assert likeliest(engine, tokens, n_prompt)[:n] == tokens[n_prompt:n_prompt + n]
    # every guess holds: the policy drafts longer runs, each pass far cheaper than its steps
    assert best_guess(engine, tokens, n_prompt) > 1.5


def test_a_sampled_answer_parts_from_the_likeliest_tokens_and_the_bound_is_lower(engine):
    tokens, result = _answered(engine, 1.5)
    n_prompt = result.prompt_tokens
    guesses = likeliest(engine, tokens, n_prompt)
    assert len(guesses) == len(tokens) - n_prompt
    assert guesses != tokens[n_prompt:]
    sampled = best_guess(engine, tokens, n_prompt)
    greedy_tokens, greedy = _answered(engine, 0)
    assert sampled < best_guess(engine, greedy_tokens, greedy.prompt_tokens)


def test_the_engine_answers_as_before_after_an_answer_is_read_again(engine):
    tokens, result = _answered(engine, 0)
    likeliest(engine, tokens, result.prompt_tokens)
    assert engine.cache.live.tolist() == tokens[:-1]
    again_tokens, again = _answered(engine, 0)
    assert again.text == result.text and again_tokens == tokens
