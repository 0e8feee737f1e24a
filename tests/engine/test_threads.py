"""Thread choice: from the cores actually free, a CPU quota, the user's override."""

import subprocess
import sys

import pytest

from engine.machine import cpus
from engine.errors import EngineError
from engine.machine.threads import Readings, ThreadTuner, choose, override_from


def readings(cores=2, others=0.0, quota=None, allowed=None):
    return Readings(physical=cores, allowed=allowed or cores, quota=quota, others=others,
                    source="synthetic")


def test_an_idle_machine_uses_every_core_for_both():
    choice = choose(readings(cores=4))
    assert (choice.decode, choice.batch) == (4, 4)


def test_one_busy_core_of_two_leaves_decoding_one_thread():
    """The measured case: a CPU-bound competitor on 2 cores made 2 decode threads 3x slower."""
    choice = choose(readings(cores=2, others=1.0))
    assert choice.decode == 1
    assert "others busy 1.0" in choice.reason


def test_prefill_keeps_cores_that_are_only_partly_busy():
    choice = choose(readings(cores=4, others=1.4))
    assert choice.decode == 2
    assert choice.batch == 3


def test_a_saturated_machine_still_gets_one_thread():
    choice = choose(readings(cores=2, others=5.0))
    assert (choice.decode, choice.batch) == (1, 1)


def test_a_cpu_quota_caps_both():
    choice = choose(readings(cores=16, quota=2.5))
    assert (choice.decode, choice.batch) == (2, 2)
    assert "quota 2.5" in choice.reason
    assert choose(readings(cores=16, quota=0.5)).decode == 1


def test_affinity_narrower_than_the_cores_counts():
    assert choose(readings(cores=8, allowed=3)).decode == 3


def test_the_users_count_wins(monkeypatch):
    monkeypatch.setenv("CHATDB_THREADS", "3")
    assert override_from(None) == (3, "CHATDB_THREADS")
    assert override_from(5) == (5, "--threads")
    choice = choose(readings(cores=2, others=2.0), *override_from(None))
    assert (choice.decode, choice.batch, choice.reason) == (3, 3, "set by CHATDB_THREADS")
    monkeypatch.setenv("CHATDB_THREADS", "lots")
    with pytest.raises(EngineError, match="CHATDB_THREADS"):
        override_from(None)


class Probe:
    """A machine of two cores whose /proc/stat counters the test advances."""

    def __init__(self):
        self.cpus, self.physical, self.quota = [0, 1], 2, None
        self.now = cpus.Snapshot(0.0, 0.0, {0: (0, 0), 1: (0, 0)}, None)

    def snapshot(self):
        return self.now

    def advance(self, seconds, busy0, busy1, own=0.0):
        """`seconds` pass; CPU0 and CPU1 were busy these shares of them; we ran `own` seconds."""
        t = int(seconds * 100)
        (b0, t0), (b1, t1) = self.now.cpus[0], self.now.cpus[1]
        self.now = cpus.Snapshot(self.now.wall + seconds, self.now.own_cpu + own,
                                    {0: (b0 + int(t * busy0), t0 + t), 1: (b1 + int(t * busy1), t1 + t)},
                                    None)


def test_the_tuner_follows_a_competitor_coming_and_going():
    probe = Probe()
    tuner = ThreadTuner(probe=probe)
    assert tuner.choice.decode == 2
    probe.advance(5, 1.0, 0.1)                       # someone else keeps a core busy
    assert tuner.recheck().decode == 1
    probe.advance(5, 1.0, 1.0, own=5.0)              # a turn of ours on one core: not competition
    assert tuner.recheck() is None                   # unchanged
    tuner.turn_ended()
    probe.advance(5, 0.05, 0.0)                      # the competitor is gone
    assert tuner.recheck().decode == 2


def test_a_gap_too_short_to_tell_keeps_the_choice():
    probe = Probe()
    tuner = ThreadTuner(probe=probe)
    probe.advance(0.1, 1.0, 1.0)
    assert tuner.recheck() is None and tuner.choice.decode == 2


def test_an_override_is_never_rechecked():
    probe = Probe()
    tuner = ThreadTuner(threads=2, probe=probe)
    probe.advance(5, 1.0, 1.0)
    assert tuner.recheck() is None and tuner.choice.decode == 2


@pytest.mark.skipif(cpus.snapshot().cpus is None, reason="no /proc/stat here")
def test_a_real_competitor_process_is_seen_as_busy():
    allowed = cpus.allowed_cpus()
    before = cpus.snapshot()
    spin = "import time\nend = time.process_time() + 0.8\nwhile time.process_time() < end: pass"
    subprocess.run([sys.executable, "-c", spin], timeout=60, check=True)
    others, source = cpus.others_busy(before, cpus.snapshot(), allowed)
    assert source.startswith("/proc/stat")
    assert others >= 0.5  # it ran 0.8 s of CPU in a little more than that (other load only adds)
