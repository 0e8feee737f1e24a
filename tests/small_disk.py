"""A small tmpfs of its own for a test (a full or read-only disk); mounting one needs root."""

import os
import subprocess
from contextlib import contextmanager

import pytest


@contextmanager
def small_tmpfs(mount, size: str = "4m"):
    """Mount a tmpfs of `size` at `mount` (made here) for the block; skip the test without root."""
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                                            str(mount)], capture_output=True).returncode:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)
