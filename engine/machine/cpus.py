"""What the operating system says about the CPUs this process may use.

Every reading has a fallback, because most of the sources are Linux-only:
os.sched_getaffinity (not on macOS or Windows), /sys topology, cgroup quota
files and /proc/stat. Missing sources give "unknown" (None), never an error;
the thread choice (threads.py) then assumes what the other readings allow.
"""

import os
import platform
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SYS = Path("/sys")
PROC = Path("/proc")


def allowed_cpus() -> list[int]:
    """Logical CPUs this process may run on (all of them where affinity is unknown)."""
    getaffinity = getattr(os, "sched_getaffinity", None)
    if getaffinity is not None:
        try:
            return sorted(getaffinity(0))
        except OSError:
            pass
    return list(range(os.cpu_count() or 1))


def physical_cores(cpus: "list[int] | None" = None) -> int:
    """Physical cores among `cpus`: hyper-threads sharing a core slow llama.cpp down."""
    cpus = allowed_cpus() if cpus is None else cpus
    cores = set()
    try:
        for cpu in cpus:
            topo = SYS / f"devices/system/cpu/cpu{cpu}/topology"
            cores.add((topo / "physical_package_id").read_text().strip()
                      + ":" + (topo / "core_id").read_text().strip())
    except OSError:
        return max(1, min(len(cpus), _sysctl_physical() or len(cpus)))
    return max(1, len(cores))


def _sysctl_physical() -> "int | None":
    """macOS and the BSDs: hw.physicalcpu (no /sys there)."""
    try:
        out = subprocess.run(["sysctl", "-n", "hw.physicalcpu"], capture_output=True,
                             text=True, timeout=2)
        return int(out.stdout.strip()) if out.returncode == 0 else None
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def cpu_model() -> str:
    """The CPU's name: /proc/cpuinfo where there is one, else what Python's platform says."""
    try:
        for line in (PROC / "cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_quota() -> "float | None":
    """The cgroup's CPU limit in cores (containers, systemd slices), or None if unlimited."""
    for path in _cgroup_dirs():
        try:
            quota, period = (path / "cpu.max").read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        except (OSError, ValueError):
            pass
    try:  # cgroup v1
        v1 = SYS / "fs/cgroup/cpu"
        quota = int((v1 / "cpu.cfs_quota_us").read_text())
        return None if quota <= 0 else quota / int((v1 / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None


def _cgroup_dirs() -> list[Path]:
    """This process's cgroup v2 directory, then its parents up to the root."""
    root = SYS / "fs/cgroup"
    try:
        line = next(x for x in (PROC / "self/cgroup").read_text().splitlines() if x.startswith("0::"))
        rel = Path(line[3:].strip().lstrip("/"))
        dirs = [root / rel, *[root / p for p in rel.parents]]
    except (OSError, StopIteration):
        dirs = [root]
    return [d for d in dirs if d != root] + [root]


@dataclass(frozen=True)
class Snapshot:
    """Cumulative CPU counters at one moment: enough to tell how busy the others were since."""
    wall: float
    own_cpu: float                              # seconds this process has run, all threads
    cpus: "dict[int, tuple[int, int]] | None"   # per CPU (busy, total) jiffies; None: no /proc/stat
    load: "float | None"                        # 1-minute load average, where there is one


def snapshot() -> Snapshot:
    return Snapshot(time.monotonic(), time.process_time(), _proc_stat(), _load())


def _proc_stat() -> "dict[int, tuple[int, int]] | None":
    try:
        lines = (PROC / "stat").read_text().splitlines()
    except OSError:
        return None
    cpus = {}
    for line in lines:
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit():
            values = [int(v) for v in fields[:8]]   # user nice system idle iowait irq softirq steal
            total = sum(values)
            cpus[int(name[3:])] = (total - values[3] - values[4], total)  # steal counts as busy
    return cpus or None


def _load() -> "float | None":
    getloadavg = getattr(os, "getloadavg", None)
    try:
        return getloadavg()[0] if getloadavg else None
    except OSError:
        return None


class Probe:
    """This machine's CPUs as the thread choice sees them (tests give their own)."""

    def __init__(self):
        self.cpus = allowed_cpus()
        self.physical = physical_cores(self.cpus)
        self.quota = cpu_quota()

    def snapshot(self) -> Snapshot:
        return snapshot()


def others_busy(before: Snapshot, after: Snapshot, cpus: list[int]) -> "tuple[float | None, str]":
    """Cores' worth of work other processes did on `cpus` between two snapshots.

    From /proc/stat: busy time of those CPUs less this process's own CPU time,
    so our own threads never count as competition. Elsewhere the load
    average stands in (a slow one-minute mean, our own threads included: less
    our last decoding it overestimates); on Windows nothing is known.
    """
    wall = after.wall - before.wall
    own = (after.own_cpu - before.own_cpu) / wall if wall > 0 else 0.0
    if before.cpus is not None and after.cpus is not None and wall > 0:
        busy = 0.0
        for cpu in cpus:
            if cpu in before.cpus and cpu in after.cpus:
                (b0, t0), (b1, t1) = before.cpus[cpu], after.cpus[cpu]
                busy += (b1 - b0) / (t1 - t0) if t1 > t0 else 0.0
        return max(0.0, busy - own), f"/proc/stat over {wall:.1f} s"
    if after.load is not None:
        return max(0.0, after.load - own), "load average"
    return None, "no load reading on this system"
