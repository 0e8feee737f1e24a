"""How many tokens to draft: as many as pay for their verification, or none.

Verifying k drafted tokens is one forward pass over k+1 tokens, which costs
cost(k, cells) single steps; with per-token acceptance p it yields
(1 - p^(k+1)) / (1 - p) tokens. p is a running average of what the answer
accepts; the cost comes from a model of the backend (cpu_costs: on a CPU
each verified row costs more the longer the context), not from timing the
answer, so that the same prompt and seed give the same batches and so the
same tokens. k is the length with the best yield per cost: up to 16, or 63
when nearly every guess holds. When no length beats plain decoding, drafting
pauses, and retries after a backoff that doubles each time it fails again.
A drafter that costs nothing to ask (prompt lookup, the archive: lookups, no
forward pass) is still asked while it pauses; its guesses are not verified but
scored on the tokens that come (`watched`), so an answer that starts to quote
or repeat drafts again within a few tokens, and a pause ends in a paid probe
only where nothing was watched.

In a pass shared with other sequences (chatdb serve's slots), guesses cost
what they add to that pass: llama.cpp splits it into micro-batches of equal
tokens per sequence, so one sequence's guesses add micro-batches of their
own, and bench/shared_pass.py measures each drafted row beside three plain
ones at 0.77-0.82 of a plain token; the engine learns that cost from its own
timed shared passes (machine/shared_costs.py). There the length is the one that
pays by that cost, usually none (prose): drafting waits for a pass where it pays,
without the pause, which is for guesses that do not hold.
"""

from ..machine.shared_costs import PRIOR_ROW

LENGTHS = (*range(1, 17), 63)
ALPHA_GPU = 0.05   # extra cost of each verified guess on a GPU, in single decode steps
PAUSE_MIN, PAUSE_MAX = 16, 512
SMOOTHING = 0.25


def gpu_cost(k: int, cells: int) -> float:
    return 1 + ALPHA_GPU * k


def shared_cost(k: int, cells: int, row: float = PRIOR_ROW) -> float:
    """Verifying k guesses beside other sequences, in this sequence's plain tokens, each
    drafted row costing `row` of them."""
    return 1 + row * k


def expected_tokens(p: float, k: int) -> float:
    """Tokens one verification yields: accepted drafts plus the target's own next token."""
    if p >= 0.999:
        return k + 1.0
    return (1 - p ** (k + 1)) / (1 - p)


class DraftPolicy:
    def __init__(self, cost=gpu_cost, acceptance: float = 0.6, min_gain: float = 1.0,
                 shared_row: float = PRIOR_ROW):
        # p of the docstring: the running share of guesses the answer accepts
        self.cost, self.acceptance, self.min_gain = cost, acceptance, min_gain
        self.shared_row = shared_row   # a drafted row of a shared pass, in its plain tokens
        self.cells = 0
        self.paused_for = 0
        self.probing = False
        self.backoff = PAUSE_MIN

    def length(self, cells: int = 0, shared: int = 0) -> int:
        """Draft length to try now, with `cells` tokens of context and `shared` other
        sequences in the pass (0: decode plainly)."""
        self.cells = cells
        if self.paused_for > 0:
            self.paused_for -= 1
            return 0
        if shared:
            k, gain = self.best(lambda k, cells: shared_cost(k, cells, self.shared_row))
            return k if gain > self.min_gain else 0
        k, gain = self.best()
        if gain > self.min_gain:
            return k
        if self.probing:  # a pause just ended: measure again before giving up again
            self.probing = False
            return self.probe_length()
        self.paused_for, self.probing = self.backoff, True
        self.backoff = min(PAUSE_MAX, self.backoff * 2)
        return 0

    def probe_length(self) -> int:
        """The length of a guess that measures again (after a pause)."""
        return max(2, self.best()[0])

    def watched(self, guessed: int, held: int) -> None:
        """Learn from a guess of `guessed` tokens that was not verified (its drafter asked
        while it did not draft: drafting.DraftRun), `held` of them right by the tokens that
        came. Such guesses measure what a probe would, for nothing: a pause ends as soon as
        they say guessing pays again, and none ends in a paid probe that they say would fail."""
        self.verified(guessed, held)
        self.probing = False
        if self.paused_for and self.best()[1] > self.min_gain:
            self.paused_for = 0

    def best(self, cost=None) -> "tuple[int, float]":
        cost = cost or self.cost
        gains = [(expected_tokens(self.acceptance, k) / cost(k, self.cells), k) for k in LENGTHS]
        gain, k = max(gains)
        return k, gain

    def verified(self, drafted: int, accepted: int) -> None:
        """Learn from one verification of `drafted` tokens, `accepted` of them right."""
        trials = accepted + (1 if accepted < drafted else 0)
        if trials:
            self.acceptance = min(0.999, _mix(self.acceptance, accepted / trials))
        if accepted == drafted:
            self.backoff = PAUSE_MIN


def _mix(old: float, new: float) -> float:
    return old + SMOOTHING * (new - old)
