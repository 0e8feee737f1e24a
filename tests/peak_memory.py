"""The peak resident memory of a command, in a process of its own.

A child's ru_maxrss counts the pages of the process it was forked from (the
high-water mark of the memory it started with), so a test or bench measuring a
`chatdb` child would measure itself. Here a small launcher forks the command
and reports its peak: the floor is the launcher's few megabytes, not the caller's.
"""

import os
import subprocess
import sys

LAUNCHER = """
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(str(usage.ru_maxrss * 1024))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def peak_rss(argv: list, *, cwd, env: dict, report, timeout: float
             ) -> "tuple[int, str, int]":
    """(exit status, stderr, peak resident bytes) of running argv; `report` is a
    path the launcher writes the peak to."""
    done = subprocess.run([sys.executable, "-I", "-S", "-c", LAUNCHER, str(report), *map(str, argv)],
                          cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, timeout=timeout)
    peak = int(open(report).read()) if os.path.exists(report) else 0
    return done.returncode, done.stderr, peak
