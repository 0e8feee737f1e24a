"""Verifying drafted guesses: the target's own sampler decides at every drafted position.

The token before the guesses and the guesses were decoded in one pass with
logits at each of them (batch rows row, row + 1, ...). The target model's
sampler chain samples at every drafted position; a guess is kept only while
it equals that sample, and the first differing sample is the next token.
Every token is therefore drawn from the target model's distribution exactly
as without drafting; greedy output is identical. Sampling runs in llama.cpp.
"""


def verify(sampler, ctx, row: int, drafts: "list[int]", keep) -> "tuple[int, int | None]":
    """(guesses accepted, the next token, or None where the answer ended at a kept guess);
    `keep(guess)` takes each accepted guess and says whether the answer ends there."""
    accepted = 0
    for i, guess in enumerate(drafts):
        sampled = sampler.sample(ctx, row + i)
        if sampled != guess:
            return accepted, sampled
        accepted += 1
        if keep(guess):
            return accepted, None
    return accepted, sampler.sample(ctx, row + len(drafts))
