"""A process keeps its SQLite locks on the archive however many connections it opens.

Closing any descriptor of a database file drops every POSIX lock the process holds on
it. If opening a second connection read the file's first bytes through a descriptor of
its own, another process closing its connection would find the archive unused, fold
the WAL into it and delete it, and this process's later commits would go to a WAL
no one else reads (lost at the next such close)."""

import sqlite3
import subprocess

import pytest

from chatdb.archive import Archive
from ..chatdb_command import chatdb_argv, python_path


@pytest.mark.timeout(120)
def test_a_second_connection_keeps_the_first_ones_locks(db_path):
    with Archive.open(db_path) as first:
        first.create_conversation("before")
        with Archive.open(db_path):   # a second connection in the same process, as a server has
            pass
        done = subprocess.run(chatdb_argv("list", "--db", db_path, "--json"), capture_output=True,
                              text=True, timeout=100, env={"PYTHONPATH": python_path(),
                                                          "PATH": "/usr/bin:/bin"})
        assert done.returncode == 0, done.stderr
        first.create_conversation("after")
        other = sqlite3.connect(db_path)   # a reader as any other process is
        titles = {t for (t,) in other.execute("SELECT title FROM conversations")}
        other.close()
    assert titles == {"before", "after"}
