"""Speculative decoding for one slot: which drafters guess (--draft off|archive|lookup|model|auto),
how many guesses to verify (draft_policy.py), and what it came to.

`Drafting` is a slot's setup (the mode in force, its sequence of the draft
model if there is one, the archive's drafting, where the verification costs
come from); each answer gets a `DraftRun` of its own from it, with a fresh
policy per drafter: the same prompt and seed give the same batches.

Drafters are asked in order (the archive, lookup, the draft model); each has
its own policy, which learns how often its guesses hold and drafts only the
length that pays by the cost model, or pauses it: the first drafter whose
policy drafts now and that has a guess is verified. A drafter whose guesses
do not pay is paused and the next one is asked; a paused drafter that costs
nothing to ask (`free_to_ask`) still guesses, unverified, and its policy
learns from those guesses once the tokens they guessed have come.

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
from ..machine.shared_costs import PRIOR_ROW
from .draft_policy import DraftPolicy, gpu_cost
from .lookup import LookupDrafter
from .modes import ASKED, DraftMode

def resolve_mode(mode: "str | DraftMode", has_draft_model: bool,
                 cuts_back: bool = True) -> DraftMode:
    """The mode in force: auto is the archive, then lookup, then the draft model (where one
    is given).

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
        return DraftMode.ARCHIVE_LOOKUP_MODEL if has_draft_model else DraftMode.ARCHIVE_LOOKUP
    return mode


@dataclass
class Drafting:
    """How one slot drafts."""
    mode: DraftMode = DraftMode.OFF
    # the draft model's guesser in this slot's sequence (draft_model.ModelDrafter), where
    # a draft model is loaded
    draft_model: "object | None" = None
    costs: "object" = lambda: gpu_cost   # () -> the verify cost function (the tuning's, now)
    archive: "object | None" = None    # the engine's archive_drafts.ArchiveDrafts
    shared_row: "object" = lambda: PRIOR_ROW   # () -> a drafted row's cost in a shared pass

    def run(self, prompt: list[int], mode: "DraftMode | None" = None, cost=None,
            answering: "tuple | None" = None) -> "DraftRun":
        """Drafting for one answer to `prompt` (in `mode`, or the slot's; by the verify
        `cost`, or the slot's); `answering`: (conversation id, message id) of the message
        answered, where it is one of the archive's."""
        mode = self.mode if mode is None else mode
        cost = cost or self.costs()
        drafters = []
        if mode.from_archive and self.archive is not None:
            drafters.append(("archive", self.archive.drafter(*(answering or (None, None)))))
        if mode.looks_up:
            drafters.append(("lookup", LookupDrafter(prompt)))
        if mode.uses_model and self.draft_model is not None:
            drafters.append(("model", self.draft_model))
        row = self.shared_row()   # as it stands when the answer begins, like `cost`
        return DraftRun(mode, [(name, d, Policies(cost, row)) for name, d in drafters],
                        uses_model=mode.uses_model and self.draft_model is not None)


PRIORS = {"start": 0.8, "follow": 0.8}   # acceptance expected of a drafter's kinds of guess


class Policies:
    """A drafter's policies, one per kind of guess it tells apart (`kind(context)`: the
    archive drafter's guesses along a source the answer keeps to hold far more often than
    those of a new lookup); one for a drafter that tells none apart."""

    def __init__(self, cost, shared_row: float = PRIOR_ROW):
        self.cost, self.shared_row, self.by_kind = cost, shared_row, {}

    def of(self, drafter, context) -> DraftPolicy:
        kind = drafter.kind(context) if hasattr(drafter, "kind") else ""
        if kind not in self.by_kind:
            self.by_kind[kind] = DraftPolicy(self.cost, acceptance=PRIORS.get(kind, 0.6),
                                             shared_row=self.shared_row)
        return self.by_kind[kind]

    def best(self) -> "tuple[int, float]":
        return max((p.best() for p in self.by_kind.values()), key=lambda b: b[1], default=(0, 0))


class DraftRun:
    """One answer's guesses, and what became of them."""

    def __init__(self, mode: DraftMode, drafters: list, uses_model: bool = False):
        """`drafters`: (name, drafter, its policy), asked in that order."""
        self.mode, self.drafters = mode, drafters
        self.uses_model = uses_model   # the draft model guesses (its KV is restored too)
        self.drafted = self.accepted = self.target_forwards = 0
        self.guessing = None           # (name, policy) of the guesses in flight
        self.watching: dict = {}       # name -> (policy, guess, where it starts): unverified
        self.by = {name: [0, 0] for name, _, _ in drafters}   # drafted, accepted

    def live(self, tokens: list, start: int) -> None:
        """Another answer to the same prompt, being written (n > 1): the archive drafter
        reads it too."""
        for name, drafter, _ in self.drafters:
            if name == "archive":
                drafter.live(tokens, start)

    def guesses(self, context: list[int], position: int, room: int, shared: int = 0) -> list[int]:
        """Guesses to verify after `context` (the token to decode next is its last), at
        most `room`; none where drafting is off or does not pay now; `shared`: other
        sequences in the same pass."""
        self.target_forwards += 1
        self._score_watched(context)
        for name, drafter, policies in self.drafters:
            policy = policies.of(drafter, context)
            k = min(policy.length(position, shared), room)
            if k == 0 and room > 0:
                self._watch(name, drafter, policy, context)
            guess = drafter.propose(context, k) if k > 0 else []
            if guess:
                self.guessing = name, policy
                self.watching.pop(name, None)   # verified guesses tell the policy instead
                return guess
        return []

    def _watch(self, name: str, drafter, policy: DraftPolicy, context: list) -> None:
        """A guess from a drafter that does not draft now, where asking costs nothing (a
        lookup, not a forward pass): kept unverified, to be scored on the tokens that come."""
        if getattr(drafter, "free_to_ask", False) and name not in self.watching:
            guess = drafter.propose(context, policy.probe_length())
            if guess:
                self.watching[name] = (policy, guess, len(context))

    def _score_watched(self, context: list) -> None:
        """Score each watched guess as a verification would have, once the tokens it guessed
        have come (or one that parts from it has)."""
        for name, (policy, guess, start) in list(self.watching.items()):
            came = context[start:start + len(guess)]
            held = next((i for i, (g, t) in enumerate(zip(guess, came)) if g != t), len(came))
            if held < len(guess) and held == len(came):
                continue   # all that came so far holds: wait for the rest
            policy.watched(len(guess), held)
            del self.watching[name]

    def verified(self, drafted: int, accepted: int) -> None:
        self.drafted += drafted
        self.accepted += accepted
        name, policy = self.guessing
        self.by[name][0] += drafted
        self.by[name][1] += accepted
        policy.verified(drafted, accepted)

    def figures(self, draft_kv=None) -> dict:
        """How drafting went, and how the draft model's KV was restored (kv.cache.Restored)."""
        busiest = max(self.drafters, key=lambda e: self.by[e[0]][0], default=None)
        figures = {"mode": self.mode, "drafted": self.drafted, "accepted": self.accepted,
                   "acceptance_rate": (round(self.accepted / self.drafted, 3) if self.drafted
                                       else None),
                   "target_forwards": self.target_forwards,
                   "draft_length": busiest[2].best()[0] if busiest else 0,
                   "by_drafter": {name: {"drafted": d, "accepted": a}
                                  for name, (d, a) in self.by.items()}}
        if draft_kv is not None:
            figures["draft_kv"] = {"restored_tokens": draft_kv.restored_tokens,
                                   "source": draft_kv.source}
        return figures


def from_each_other(answers: list) -> None:
    """Answers to one prompt (n > 1) guess from each other's tokens as they are written;
    `answers`: (DraftRun, its context list, its prompt's length) of each."""
    for run, _, _ in answers:
        for other, context, start in answers:
            if other is not run:
                run.live(context, start)


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
