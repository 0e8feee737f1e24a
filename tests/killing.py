"""kill -9 a chatdb process in the middle of writing a file (a crash at that moment)."""

import signal
import subprocess

import pytest

from .chatdb_command import REPO
from .polling import wait_until

TRIES = 5


def kill_9_while_it_writes(argv, env, folder, pattern: str, at_bytes: int = 1 << 20) -> None:
    """Run `argv` until a file matching `pattern` in `folder` has grown to `at_bytes`, then
    SIGKILL it; tried again if it ended first (a fast machine), failing after TRIES."""
    def grown():
        return [p for p in folder.glob(pattern) if _size(p) >= at_bytes]

    for _ in range(TRIES):
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        seen = wait_until(lambda: grown() or proc.poll() is not None, interval=0.002,
                          what=f"{pattern} to grow")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        if seen is not True and proc.returncode == -signal.SIGKILL:
            return
    pytest.fail(f"{argv[3:]} always ended before it could be killed")


def _size(path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
