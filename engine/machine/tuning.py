"""Threads and forward-pass costs that follow the machine the engine runs on.

Threads are chosen at open and re-checked before every turn (threads.py).
The draft policy's cost model is measured at first use (calibrate.py),
stored in the archive under the engine configuration, the machine and the
decode thread count, and refined after every turn from the timings of that
turn's own forward passes. Each answer uses the model as it stood when the
answer began, so the same prompt and seed give the same batches within it.

CHATDB_DRAFT_COSTS=prior pins the policy to the built-in prior for the backend
(cpu_costs.py) and to the shared-pass prior: nothing is measured, learned or
stored, so how much is drafted no longer follows the machine's load and the
same prompt and seed give the same batches in every run (on a model whose
kernels are not batch-invariant, the same tokens too).
"""

import os
import time

from chatdb.archive import Archive

from ..llama.model import Model
from ..llama.sequence import Sequence
from . import cpu_costs
from .calibrate import calibrate
from .cost_model import CostModel
from .hardware import HardwareReport
from .shared_costs import SharedPassCosts
from .threads import ThreadChoice, ThreadTuner

ENV = "CHATDB_DRAFT_COSTS"


def pinned_to_prior() -> bool:
    """Whether $CHATDB_DRAFT_COSTS pins the costs to the prior (`learn`, the default, or `prior`)."""
    asked = os.environ.get(ENV, "").strip() or "learn"
    if asked not in ("learn", "prior"):
        from ..errors import EngineError
        raise EngineError(f"{ENV}={asked!r}: expected learn or prior")
    return asked == "prior"


class Tuning:
    def __init__(self, threads: ThreadTuner, report: HardwareReport):
        self.threads, self.machine = threads, report.machine_id()
        self.models: dict[int, CostModel] = {}   # decode threads -> fitted model
        self.turns: dict[int, int] = {}
        self.pinned = pinned_to_prior()
        self.cost_source = f"prior, pinned by {ENV}" if self.pinned else "prior"
        # learned in this process, from its shared passes (unless pinned)
        self.shared = SharedPassCosts(learns=not self.pinned)

    def attach(self, model: Model, seq: Sequence, archive: Archive, fingerprint: str,
               measure: bool) -> None:
        """Load this configuration's cost model, or measure it now on `seq` (`measure`:
        drafting is on)."""
        self.model, self.archive = model, archive
        self.key = f"{fingerprint}:{model.config.n_gpu_layers}"
        self.prior = cpu_costs.PRIOR if model.on_cpu else cpu_costs.GPU_PRIOR
        # On the CPU, the CPU time of the thread that calls llama_decode (it computes a
        # share itself and waits for the others): unlike wall time, it does not count
        # the time other processes had the core, so a crowded machine still measures
        # what passes cost. A GPU computes while that thread waits: wall time there.
        self.clock = time.thread_time if model.on_cpu else time.perf_counter
        self.before_turn()  # the others were measured while the model loaded
        if self.pinned:
            return
        if self._load(model.threads_decode):
            self.cost_source = "archive"
        elif measure:
            measured = calibrate(model, seq, self.clock)
            self.models[model.threads_decode] = measured.fitted(self.prior)
            self.turns[model.threads_decode] = 0
            self.cost_source = "measured"
            self._store(model.threads_decode)

    @property
    def choice(self) -> ThreadChoice:
        return self.threads.choice

    def before_turn(self) -> None:
        """Follow the machine: new thread counts when the free cores changed."""
        self.threads.recheck()
        choice = self.threads.choice
        if (choice.decode, choice.batch) != (self.model.threads_decode, self.model.threads_batch):
            self.model.set_threads(choice.decode, choice.batch)
            self._load(choice.decode)

    def costs(self) -> CostModel:
        """The cost model for the threads in use (the nearest measured one until timings come)."""
        threads = self.model.threads_decode
        if threads in self.models:
            return self.models[threads]
        if self.models:
            nearest = min(self.models, key=lambda t: abs(t - threads))
            return self.models[nearest]
        return self.prior

    def after_turn(self, timings: "list[tuple[int, int, float]]") -> None:
        """Refine the model from one turn's forward passes: (rows, cells, ms) each."""
        self.threads.turn_ended()
        if not timings or self.pinned:
            return
        threads = self.model.threads_decode
        self._load(threads)  # another engine on this archive may have measured it since
        current = self.models.get(threads) or CostModel(bins={})
        for rows, cells, ms in timings:
            current.add(rows, cells, ms)
        prior = self.costs() if threads not in self.models else self.prior
        self.models[threads] = current.fitted(prior)
        self.turns[threads] = self.turns.get(threads, 0) + 1
        self._store(threads)

    def describe(self) -> dict:
        costs = self.costs()
        return {"threads": self.choice.to_dict(), "cost_model": {
            "source": self.cost_source, "machine": self.machine,
            "turns": self.turns.get(self.model.threads_decode, 0),
            "verify_4_at_1000": round(costs.verify_cost(4, 1000), 3), **costs.describe()},
            "shared_pass": self.shared.describe()}

    def _load(self, threads: int) -> bool:
        if threads in self.models:
            return True
        if self.pinned:
            return False
        stored = self.archive.costs.get(self.key, self.machine, threads)
        if stored is None:
            return False
        self.models[threads], self.turns[threads] = CostModel.from_json(stored[0]), stored[1]
        return True

    def _store(self, threads: int) -> None:
        with self.archive.transaction():
            self.archive.costs.put(self.key, self.machine, threads,
                                   self.models[threads].to_json(), self.turns[threads])
