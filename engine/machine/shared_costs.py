"""What a drafted row costs in a forward pass shared with other sequences, learned from
the scheduler's own timed shared passes.

llama.cpp splits a pass of several sequences into micro-batches of equal tokens per
sequence, so one sequence's guesses add micro-batches of their own: a drafted row
costs a good part of a plain token of that pass, and how much depends on the backend
and the machine. The draft policy weighs it in "plain tokens of the pass": a pass of
S sequences decoding one token each takes m0, one plain token is m0 / S of it, and a
pass with e drafted rows more takes m_e, so each drafted row costs

    (m_e - m0) / e / (m0 / S)

Timings are kept as running means per (S, e) bin (as cost_model.py keeps its own);
the cost is the bins' weighted mean, the prior until a pass of S plain and one of S
with guesses have both been timed often enough to say.
"""

from dataclasses import dataclass, field

from .cost_model import timed_once_more

# A drafted row beside three plain ones took 0.77-0.82 of a plain token on the 2-core
# CPUs bench/shared_pass.py was first run on: where nothing is measured yet.
PRIOR_ROW = 0.8
MIN_PASSES = 4            # timings a bin needs before it says anything
MAX_WEIGHT = 64           # a bin's count stops growing here: new timings keep moving it
MAX_EXTRA = 64            # drafted rows of one pass told apart (more are binned here)
LOWEST, HIGHEST = 0.05, 2.0   # a learned cost is kept within these (a few odd passes)


@dataclass
class SharedPassCosts:
    prior: float = PRIOR_ROW
    bins: dict = field(default_factory=dict)   # (sequences, extra rows) -> [count, mean ms]
    learns: bool = True   # False: the prior stands (CHATDB_DRAFT_COSTS=prior)

    def add(self, sequences: int, rows: int, ms: float) -> None:
        """One timed pass of `sequences` generating sequences computing `rows` rows."""
        if not self.learns or sequences < 2 or rows < sequences or ms <= 0:
            return
        key = (sequences, min(rows - sequences, MAX_EXTRA))
        n, mean = self.bins.get(key, (0, 0.0))
        self.bins[key] = list(timed_once_more(n, mean, ms, MAX_WEIGHT))

    def row_cost(self) -> float:
        """A drafted row of a shared pass, in plain tokens of that pass."""
        learned = self._learned()
        return self.prior if learned is None else learned

    def describe(self) -> dict:
        learned = self._learned()
        return {"row_cost": round(self.prior if learned is None else learned, 3),
                "source": "prior" if learned is None else "measured",
                "passes": sum(n for n, _ in self.bins.values())}

    def _learned(self) -> "float | None":
        """The bins' weighted mean cost (None: no bin can say yet)."""
        total = weight = 0.0
        for (sequences, extra), (n, mean) in self.bins.items():
            plain = self.bins.get((sequences, 0))
            if extra == 0 or n < MIN_PASSES or plain is None or plain[0] < MIN_PASSES:
                continue
            w = min(n, plain[0])
            total += w * (mean - plain[1]) / extra / (plain[1] / sequences)
            weight += w
        return None if weight == 0 else min(HIGHEST, max(LOWEST, total / weight))
