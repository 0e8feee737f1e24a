"""A brief measurement of forward-pass costs on the loaded model, for the draft policy.

At two context lengths: single decode steps and verification batches of
2..64 rows, each timed a few times (the fastest kept), the rows removed
again after each, within a time budget (what is not measured in it, the
prior fills in, scaled to what was). Run once per engine configuration, machine and thread
count (the result is stored in the archive); real turns refine it after.
The sequence is emptied before and after: it runs before any turn.
"""

import time

from ..llama.model import Model
from ..llama.sequence import Sequence
from .cost_model import CostModel

CONTEXTS = (32, 544)
ROWS = (1, 5, 17, 2, 64, 3, 9)   # the most telling first: a slow machine stops early
ESSENTIAL = (1, 5)          # a step and a batch are measured whatever the time
REPEATS = 3
BUDGET_S = 1.0            # a large model on a CPU, or a crowded machine, measures less


def calibrate(model: Model, seq: Sequence, clock=time.perf_counter) -> CostModel:
    """A cost model holding these timings as its bins (fit it against a prior)."""
    measured = CostModel()
    deadline = time.perf_counter() + BUDGET_S
    seq.keep(0)
    try:
        for cells in CONTEXTS:
            if cells + max(ROWS) > model.n_ctx or time.perf_counter() > deadline:
                break
            _measure(model, seq, cells, measured, deadline, clock)
    finally:
        seq.keep(0)
    return measured


def _measure(model: Model, seq: Sequence, cells: int, into: CostModel, deadline: float,
             clock) -> None:
    tokens = [(1000 + i * 7) % model.n_vocab for i in range(cells + max(ROWS))]
    seq.keep(0)
    seq.prefill(tokens[:cells])
    seq.step(tokens[cells])  # warm-up: first use of this shape
    seq.keep(cells)
    for rows in ROWS:
        over = time.perf_counter() > deadline and (cells != CONTEXTS[0] or rows not in ESSENTIAL)
        if rows > model.config.n_batch or over:
            continue
        times = []
        for _ in range(REPEATS):
            t0 = clock()
            if rows == 1:
                seq.step(tokens[cells])
            else:
                seq.verify(tokens[cells: cells + rows])
            times.append((clock() - t0) * 1000)
            seq.keep(cells)
        into.add(rows, cells, min(times))  # the least disturbed: other processes only add
