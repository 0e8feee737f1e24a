"""Speculative decoding for one slot: which drafter guesses (--draft off|lookup|model|auto),
how many guesses to verify (draft_policy.py), and what it came to.

`Drafting` is a slot's setup (the mode in force, its sequence of the draft
model if there is one, where the verification costs come from); each answer
gets a `DraftRun` of its own from it, with a fresh policy: the same prompt
and seed give the same batches.

Verifying guesses (`accept_guesses`): the token before the guesses and the guesses are
decoded in one pass with logits at each of them (batch rows row, row + 1,
...). The target model's sampler chain samples at every drafted position; a
guess is kept only while it equals that sample, and the first differing
sample is the next token. Every token is therefore drawn from the target
model's distribution exactly as without drafting; greedy output is
identical. Sampling runs in llama.cpp.
"""

from dataclasses import dataclass

from ..errors import EngineError
from .draft_policy import DraftPolicy, gpu_cost
from .lookup import LookupDrafter
from .modes import ASKED, DraftMode


def resolve_mode(mode: "str | DraftMode", has_draft_model: bool,
                 cuts_back: bool = True) -> DraftMode:
    """The mode in force: auto is lookup, then the draft model when lookup has no guess.

    `cuts_back`: whether the model's memory can drop rejected guesses; a recurrent
    state cannot (it would go on from tokens the answer does not have): auto is off.
    """
    if mode not in ASKED:
        raise EngineError(f"unknown draft mode {mode!r} (expected one of {', '.join(ASKED)})")
    mode = DraftMode(mode)
    if mode == DraftMode.MODEL and not has_draft_model:
        raise EngineError("--draft model needs a draft model: pass --draft-model PATH")
    if not cuts_back and mode != DraftMode.OFF:
        if mode != DraftMode.AUTO:
            raise EngineError(f"--draft {mode} needs a model whose memory can drop rejected "
                              f"guesses; this one has recurrent layers")
        return DraftMode.OFF
    if mode == DraftMode.AUTO:
        return DraftMode.LOOKUP_THEN_MODEL if has_draft_model else DraftMode.LOOKUP
    return mode


class FirstGuess:
    """Ask each drafter in turn; the first with a guess wins."""

    def __init__(self, *drafters):
        self.drafters = drafters

    def propose(self, context: list[int], k: int) -> list[int]:
        for drafter in self.drafters:
            guess = drafter.propose(context, k)
            if guess:
                return guess
        return []


def make_drafter(mode: DraftMode, prompt: list[int], draft_model=None):
    """A drafter for one answer, or None for plain decoding; `draft_model`: a drafter
    of the draft model (draft_model.ModelDrafter)."""
    drafters = []
    if mode.looks_up:
        drafters.append(LookupDrafter(prompt))
    if mode.uses_model and draft_model is not None:
        drafters.append(draft_model)
    if not drafters:
        return None
    return drafters[0] if len(drafters) == 1 else FirstGuess(*drafters)


@dataclass
class Drafting:
    """How one slot drafts."""
    mode: DraftMode = DraftMode.OFF
    # the draft model's guesser in this slot's sequence (draft_model.ModelDrafter), where
    # a draft model is loaded
    draft_model: "object | None" = None
    costs: "object" = lambda: gpu_cost   # () -> the verify cost function (the tuning's, now)

    def run(self, prompt: list[int], mode: "DraftMode | None" = None, cost=None) -> "DraftRun":
        """Drafting for one answer to `prompt` (in `mode`, or the slot's; by the verify
        `cost`, or the slot's)."""
        mode = self.mode if mode is None else mode
        policy = DraftPolicy(cost or self.costs())
        return DraftRun(mode, make_drafter(mode, prompt, self.draft_model), policy,
                        uses_model=mode.uses_model and self.draft_model is not None)


class DraftRun:
    """One answer's guesses, and what became of them."""

    def __init__(self, mode: DraftMode, drafter, policy: DraftPolicy, uses_model: bool = False):
        self.mode, self.drafter, self.policy = mode, drafter, policy
        self.uses_model = uses_model   # the draft model guesses (its KV is restored too)
        self.drafted = self.accepted = self.target_forwards = 0

    def guesses(self, context: list[int], position: int, room: int) -> list[int]:
        """Guesses to verify after `context` (the token to decode next is its last), at
        most `room`; none where drafting is off or does not pay now."""
        self.target_forwards += 1
        if self.drafter is None:
            return []
        k = min(self.policy.length(position), room)
        return self.drafter.propose(context, k) if k > 0 else []

    def verified(self, drafted: int, accepted: int) -> None:
        self.drafted += drafted
        self.accepted += accepted
        self.policy.verified(drafted, accepted)

    def figures(self, draft_kv=None) -> dict:
        """How drafting went, and how the draft model's KV was restored (kv.cache.Restored)."""
        figures = {"mode": self.mode, "drafted": self.drafted, "accepted": self.accepted,
                   "acceptance_rate": (round(self.accepted / self.drafted, 3) if self.drafted
                                       else None),
                   "target_forwards": self.target_forwards, "draft_length": self.policy.best()[0]}
        if draft_kv is not None:
            figures["draft_kv"] = {"restored_tokens": draft_kv.restored_tokens,
                                   "source": draft_kv.source}
        return figures


def accept_guesses(sampler, ctx, row: int, drafts: "list[int]", keep) -> "tuple[int, int | None]":
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
