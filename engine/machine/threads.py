"""How many threads decode and prefill use: from the cores actually free, re-checked between turns.

Decoding one token is a short pass in which every thread waits for the
slowest at each layer, so one thread sharing its core with another process
stalls them all: with one CPU-bound process on a 2-core machine, 2 decode
threads ran at a third of the speed of 1. Decode threads are therefore the
whole cores nobody else is using. A prefill batch is long, compute-bound
work that still gains from a core it shares half the time, so batch threads
count cores at least half free. A cgroup CPU quota caps both (more threads
than the quota only get throttled). `--threads N` or CHATDB_THREADS sets
both and turns the re-checks off.
"""

import math
import os
from dataclasses import asdict, dataclass

from . import cpus

ENV = "CHATDB_THREADS"
MIN_WINDOW_S = 0.25    # a shorter gap between turns says too little about the others


@dataclass(frozen=True)
class Readings:
    physical: int                 # physical cores among the allowed CPUs
    allowed: int                  # logical CPUs in this process's affinity
    quota: "float | None"         # cgroup CPU limit in cores
    others: "float | None"        # cores' worth of other processes' work on those CPUs
    source: str                   # where `others` came from


@dataclass(frozen=True)
class ThreadChoice:
    decode: int
    batch: int
    reason: str

    def to_dict(self) -> dict:
        return asdict(self)


def choose(r: Readings, override: "int | None" = None, origin: str = "--threads") -> ThreadChoice:
    """Decode and batch threads for these readings (a pure function: tests feed it readings)."""
    if override is not None:
        return ThreadChoice(override, override, f"set by {origin}")
    cores = min(r.physical, r.allowed)
    why = [f"{cores} cores"]
    if r.quota is not None:
        cores = max(1, min(cores, math.floor(r.quota + 0.05)))
        why.append(f"CPU quota {r.quota:g}")
    busy = r.others or 0.0
    decode = max(1, min(cores, math.floor(cores - busy + 0.3)))
    batch = max(decode, min(cores, math.floor(cores - busy / 2 + 0.3)))
    why.append(f"others busy {busy:.1f} cores ({r.source})" if r.others is not None else r.source)
    return ThreadChoice(decode, batch, ", ".join(why))


def override_from(threads: "int | None") -> "tuple[int | None, str]":
    """The user's thread count: --threads, else CHATDB_THREADS, else None (choose)."""
    if threads is not None:
        return threads, "--threads"
    value = os.environ.get(ENV, "").strip()
    if not value:
        return None, ""
    if not value.isdigit() or int(value) < 1:
        from ..errors import EngineError
        raise EngineError(f"{ENV} must be a whole number of threads, not {value!r}")
    return int(value), ENV


class ThreadTuner:
    """Holds the current choice and re-reads the machine between turns.

    It measures the others over the gap since the last turn ended (the time
    the user spends reading and typing, when chatdb itself is idle), or, when
    turns follow each other at once, since the last re-check (this process's
    own CPU time is taken out either way), so it never waits.
    """

    def __init__(self, threads: "int | None" = None, probe: "cpus.Probe | None" = None):
        self.override, self.origin = override_from(threads)
        self.probe = probe or cpus.Probe()
        self.last = self.idle_from = self.probe.snapshot()
        # Until a gap between turns is measured: the load average (a new process
        # has not added to it yet), where there is one.
        load = self.last.load
        self.choice = self._choose(load, "load average") if load is not None else \
            self._choose(None, "not measured yet")

    def readings(self, others: "float | None", source: str) -> Readings:
        p = self.probe
        return Readings(p.physical, len(p.cpus), p.quota, others, source)

    def _choose(self, others, source) -> ThreadChoice:
        return choose(self.readings(others, source), self.override, self.origin)

    def recheck(self) -> "ThreadChoice | None":
        """A new choice if the machine changed since the last call, else None."""
        now = self.probe.snapshot()
        start = self.idle_from if now.wall - self.idle_from.wall >= MIN_WINDOW_S else self.last
        if self.override is not None or now.wall - start.wall < MIN_WINDOW_S:
            return None
        others, source = cpus.others_busy(start, now, self.probe.cpus)
        self.last = self.idle_from = now
        choice = self._choose(others, source)
        changed = (choice.decode, choice.batch) != (self.choice.decode, self.choice.batch)
        self.choice = choice
        return choice if changed else None

    def turn_ended(self) -> None:
        self.idle_from = self.probe.snapshot()
