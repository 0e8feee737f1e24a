"""A paused drafter that costs nothing to ask keeps guessing, unverified: its guesses are scored
on the tokens that come, and end the pause as soon as they would pay (no model: the policy and
a run of prompt lookup, fed tokens as a slot would)."""

from engine.decode.draft_policy import PAUSE_MIN, DraftPolicy
from engine.decode.drafting import DraftRun, Policies
from engine.decode.lookup import LookupDrafter
from engine.decode.modes import DraftMode
from engine.machine import cpu_costs


def _paused() -> DraftPolicy:
    policy = DraftPolicy(cpu_costs.verify_cost)
    for _ in range(6):              # guesses never accepted
        policy.verified(4, 0)
    assert policy.length(cells=100) == 0 and policy.paused_for > 0
    return policy


def test_watched_guesses_that_hold_end_a_pause_at_once():
    policy = _paused()
    policy.watched(2, 2)
    policy.watched(2, 2)
    assert policy.paused_for == 0
    assert policy.length(cells=100) > 0


def test_watched_guesses_that_fail_keep_the_pause_and_spare_its_probe():
    policy = _paused()
    policy.watched(2, 0)
    waited = 0
    while policy.length(cells=100) == 0 and waited < 10 * PAUSE_MIN:
        waited += 1
    # The pause (PAUSE_MIN tokens) ended in no paid probe, the watched guess having said it
    # would fail, but in a second pause twice as long; nothing watched in that one, its end
    # is probed as before.
    assert waited == PAUSE_MIN + 1 + 2 * PAUSE_MIN


def _paused_run(prompt: list, free: bool = True) -> "tuple[DraftRun, list]":
    """A run of prompt lookup whose policy has seen only wrong guesses; (run, what the
    drafter was asked)."""
    asked = []

    class Asked(LookupDrafter):
        free_to_ask = free

        def propose(self, context, k):
            asked.append(k)
            return super().propose(context, k)

    drafter, policies = Asked(prompt), Policies(cpu_costs.verify_cost)
    run = DraftRun(DraftMode.LOOKUP, [("lookup", drafter, policies)])
    for _ in range(6):
        policies.of(drafter, prompt).verified(4, 0)
    return run, asked


def test_a_paused_lookup_drafts_again_within_a_few_tokens_of_text_it_can_guess():
    quote = list(range(2000, 2100))        # in the prompt, then quoted by the answer
    run, _ = _paused_run(quote)
    context = quote + list(range(1000, 1020))   # the answer's own words so far
    assert run.guesses(context, len(context), 16) == []   # drafting pauses here
    context += quote[:3]                   # the answer starts to quote: lookup finds it
    resumed_after = None
    for i, token in enumerate(quote[3:60]):
        drafts = run.guesses(context, len(context), 16)
        if drafts:
            resumed_after = i
            break
        context.append(token)
    assert resumed_after is not None
    assert resumed_after < PAUSE_MIN - 1, "watched guesses ended the pause, not its length"
    assert drafts == quote[3 + resumed_after:3 + resumed_after + len(drafts)]
    assert run.drafted == 0               # nothing watched counts as drafted


def test_a_drafter_that_is_not_free_to_ask_is_not_asked_while_paused():
    quote = list(range(2000, 2100))
    run, asked = _paused_run(quote, free=False)
    context = quote + list(range(1000, 1020)) + quote[:3]
    for token in quote[3:3 + PAUSE_MIN // 2]:
        assert run.guesses(context, len(context), 16) == []
        context.append(token)
    assert asked == []
