"""Long reads that Ctrl-C stops: SQLite asks back every few thousand steps.

Python runs a signal's handler only between its own bytecodes, so a
Ctrl-C during one long SQLite statement (a search of a large archive) waited
for the statement to end. With a progress handler, SQLite calls back into
Python every PROGRESS_STEPS virtual-machine steps (well under a millisecond);
the KeyboardInterrupt raised there makes SQLite abandon the statement
("interrupted"), which is raised here as KeyboardInterrupt again.
"""

import sqlite3
from contextlib import contextmanager

from . import dbapi

PROGRESS_STEPS = 10_000


@contextmanager
def interruptible(conn: sqlite3.Connection):
    conn.set_progress_handler(_go_on, PROGRESS_STEPS)
    try:
        yield conn
    except dbapi.OperationalError as exc:
        if str(exc) == "interrupted":
            raise KeyboardInterrupt from None
        raise
    finally:
        conn.set_progress_handler(None, 0)


def _go_on() -> int:
    return 0  # a pending Ctrl-C's KeyboardInterrupt is raised as this runs
