"""What a forward pass costs on the backend in use, fitted from timings of this machine.

Two shapes, both linear in the context length (cells):

    one token           step(cells)        = a + b * cells
    a batch of r >= 2   batch(r, cells)    = c + d * cells + r * (e + f * cells)

Timings (r, cells, ms) are kept in bins (rows, cells // CELL_BIN) as
running means, so a long history costs nothing to keep and new timings
slowly replace old ones; the coefficients are a least-squares fit of the
bins' relative error, pulled towards a prior of the same shape (so a bin
set that cannot tell a coefficient, say timings at one context length only,
keeps the prior's for it, scaled to the measured level).
"""

import json
from dataclasses import dataclass, field

import numpy as np

CELL_BIN = 256
MAX_WEIGHT = 32          # a bin's count stops growing here: new timings keep moving it
OUTLIER = 3.0            # a timing is taken as at most this far from its bin's mean
PRIOR_WEIGHT = 0.05      # pull of the prior per coefficient, against a bin's weight of 1


def timed_once_more(n: int, mean_ms: float, ms: float, max_weight: int) -> "tuple[int, float]":
    """(count, mean) of a bin of timings after one more, `ms`: the count stops growing at
    `max_weight`, so new timings keep moving the mean, and once the bin has a few, a
    timing is taken as at most OUTLIER from its mean (a pass another process preempted
    says little of what passes cost)."""
    if n >= 3:
        ms = min(max(ms, mean_ms / OUTLIER), mean_ms * OUTLIER)
    n = min(max_weight, n + 1)
    return n, mean_ms + (ms - mean_ms) / n


@dataclass
class CostModel:
    step_coef: tuple = (1.0, 0.0)                 # a, b
    batch_coef: tuple = (0.95, 0.0, 0.05, 0.0)    # c, d, e, f
    bins: dict = field(default_factory=dict)      # "rows:bin" -> [count, mean cells, mean ms]

    # -- costs --------------------------------------------------------------------

    def step(self, cells: int) -> float:
        a, b = self.step_coef
        return max(1e-6, a + b * cells)

    def batch(self, rows: int, cells: int) -> float:
        if rows == 1:
            return self.step(cells)
        c, d, e, f = self.batch_coef
        return max(1e-6, c + d * cells + rows * (e + f * cells))

    def verify_cost(self, k: int, cells: int) -> float:
        """Verifying k guesses (k+1 rows), in single decode steps: what the draft policy weighs.

        Never more than k+1 steps (the rows could be decoded one by one) nor less than one.
        """
        return min(k + 1.0, max(1.0, self.batch(k + 1, cells) / self.step(cells)))

    # -- learning -------------------------------------------------------------------

    def add(self, rows: int, cells: int, ms: float) -> None:
        """One timed forward pass of `rows` tokens after `cells` tokens of context."""
        key = f"{rows}:{cells // CELL_BIN}"
        n, mean_cells, mean_ms = self.bins.get(key, (0, 0.0, 0.0))
        n, mean_ms = timed_once_more(n, mean_ms, ms, MAX_WEIGHT)
        self.bins[key] = [n, mean_cells + (cells - mean_cells) / n, mean_ms]

    def fitted(self, prior: "CostModel") -> "CostModel":
        """A model fitted to the bins, the prior scaled to their level filling in."""
        steps = [(c, ms, n) for key, (n, c, ms) in self.bins.items() if key.startswith("1:")]
        batches = [(int(key.split(":")[0]), c, ms, n) for key, (n, c, ms) in self.bins.items()
                   if not key.startswith("1:")]
        if not steps:
            return CostModel(prior.step_coef, prior.batch_coef, dict(self.bins))
        scale = sum(ms / prior.step(c) * n for c, ms, n in steps) / sum(n for *_, n in steps)
        step = _fit([[1.0, c] for c, _, _ in steps], [ms for _, ms, _ in steps],
                    [n for *_, n in steps], [x * scale for x in prior.step_coef])
        batch = _fit([[1.0, c, r, r * c] for r, c, _, _ in batches], [ms for _, _, ms, _ in batches],
                     [n for *_, n in batches], [x * scale for x in prior.batch_coef])
        return CostModel(tuple(step), tuple(batch), dict(self.bins))

    # -- storage ---------------------------------------------------------------------

    def to_json(self) -> str:
        return json.dumps({"step": self.step_coef, "batch": self.batch_coef, "bins": self.bins})

    @classmethod
    def from_json(cls, text: str) -> "CostModel":
        data = json.loads(text)
        return cls(tuple(data["step"]), tuple(data["batch"]), dict(data["bins"]))

    def describe(self) -> dict:
        """Milliseconds, as a person reads them: a step and a 5-row batch at 0 and 4,096 cells."""
        return {"step_ms": [round(self.step(0), 3), round(self.step(4096), 3)],
                "batch5_ms": [round(self.batch(5, 0), 3), round(self.batch(5, 4096), 3)],
                "timings": sum(n for n, _, _ in self.bins.values())}


def _fit(features, targets, weights, prior) -> list:
    """Weighted least squares on relative error, with a ridge pull towards the prior.

    No coefficient may be negative (a cost that shrinks with context is noise):
    one that comes out negative is fixed at 0 and the rest fitted again.
    """
    prior = np.asarray(prior, float)
    if not features:
        return prior.tolist()
    x, y = np.asarray(features, float), np.asarray(targets, float)
    root_w = np.sqrt(np.asarray(weights, float))
    # Moving coefficient j costs its change in milliseconds at the typical
    # feature value, relative to the typical timing: the same unit as the residuals.
    pull = np.sqrt(PRIOR_WEIGHT) * np.diag(np.abs(x).mean(axis=0) / max(y.mean(), 1e-9))
    a = np.vstack([x * (root_w / np.maximum(y, 1e-9))[:, None], pull])
    b = np.concatenate([root_w, pull @ prior])
    free = np.ones(len(prior), bool)
    coef = np.zeros(len(prior))
    while free.any():
        coef[:] = 0.0
        coef[free], *_ = np.linalg.lstsq(a[:, free], b, rcond=None)
        if (coef >= 0).all():
            break
        free &= coef > 0
    return coef.tolist()
