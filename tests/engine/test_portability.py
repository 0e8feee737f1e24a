"""The hardware and path code where Linux's calls and files are absent (macOS, Windows).

Deleting the attributes and pointing /proc and /sys at an empty folder
simulates those systems: affinity, topology, cgroup quota, /proc/stat and
the load average all missing.
"""

import importlib
import os
import sys

import pytest

from engine.machine import cpus, hardware
from engine.machine.threads import ThreadTuner


@pytest.fixture
def not_linux(monkeypatch, tmp_path):
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.delattr(os, "getloadavg", raising=False)
    monkeypatch.setattr(cpus, "PROC", tmp_path / "proc")
    monkeypatch.setattr(cpus, "SYS", tmp_path / "sys")


def test_cpu_readings_fall_back(not_linux):
    assert cpus.allowed_cpus() == list(range(os.cpu_count()))
    assert 1 <= cpus.physical_cores() <= os.cpu_count()
    assert cpus.cpu_quota() is None
    assert cpus.cpu_model()
    snap = cpus.snapshot()
    assert snap.cpus is None and snap.load is None
    assert cpus.others_busy(snap, cpus.snapshot(), [0]) == (None, "no load reading on this system")


def test_threads_are_chosen_without_readings(not_linux):
    tuner = ThreadTuner()
    assert 1 <= tuner.choice.decode <= os.cpu_count()
    tuner.recheck()
    assert tuner.choice.decode >= 1


def test_the_load_average_stands_in_for_proc_stat(not_linux, monkeypatch):
    monkeypatch.setattr(os, "getloadavg", lambda: (1.0, 1.0, 1.0), raising=False)
    snap = cpus.snapshot()
    others, source = cpus.others_busy(snap, cpus.snapshot(), [0, 1])
    assert source == "load average" and 0 < others <= 1.0


def test_the_hardware_report_without_linux(not_linux):
    report = hardware.detect()
    assert report.logical_cores == os.cpu_count()
    assert report.devices and len(report.machine_id()) == 16


def test_cgroup_quota_files(monkeypatch, tmp_path):
    monkeypatch.setattr(cpus, "PROC", tmp_path / "proc")
    monkeypatch.setattr(cpus, "SYS", tmp_path / "sys")
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/cgroup").write_text("0::/user.slice/chat.scope\n")
    scope = tmp_path / "sys/fs/cgroup/user.slice/chat.scope"
    scope.mkdir(parents=True)
    (scope / "cpu.max").write_text("150000 100000\n")
    assert cpus.cpu_quota() == 1.5
    (scope / "cpu.max").write_text("max 100000\n")
    assert cpus.cpu_quota() is None
    (scope / "cpu.max").unlink()
    v1 = tmp_path / "sys/fs/cgroup/cpu"
    v1.mkdir(parents=True)
    (v1 / "cpu.cfs_quota_us").write_text("300000\n")
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    assert cpus.cpu_quota() == 3.0


def test_hyperthreads_count_once(monkeypatch, tmp_path):
    monkeypatch.setattr(cpus, "SYS", tmp_path)
    for cpu, core in ((0, 0), (1, 0), (2, 1), (3, 1)):
        topo = tmp_path / f"devices/system/cpu/cpu{cpu}/topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text("0\n")
        (topo / "core_id").write_text(f"{core}\n")
    assert cpus.physical_cores([0, 1, 2, 3]) == 2
    assert cpus.physical_cores([0, 1]) == 1


def test_the_console_imports_without_termios(monkeypatch):
    import cli.console.app as app

    monkeypatch.setitem(sys.modules, "termios", None)  # import termios raises ImportError
    try:
        reloaded = importlib.reload(app)
        assert reloaded.termios is None
        with reloaded.no_echo(sys.stdin):
            pass
    finally:
        monkeypatch.undo()
        importlib.reload(app)


def test_default_paths_without_xdg(monkeypatch, tmp_path):
    from chatdb.paths import default_db_path
    from cli.console.history_file import history_path

    for name in ("XDG_DATA_HOME", "XDG_STATE_HOME", "CHATDB_DB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("USERPROFILE", str(tmp_path))  # what Path.home() reads on Windows
    assert default_db_path() == tmp_path / ".local/share/chatdb/chatdb.db"
    assert history_path().parent == tmp_path / ".local/state/chatdb"
