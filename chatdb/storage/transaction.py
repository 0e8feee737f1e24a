"""Transactions: writes that take the write lock up front, and read snapshots.

BEGIN IMMEDIATE makes a writer wait (busy_timeout) for the lock at the start,
instead of failing with "database is locked" when a read turns into a write.
"""

import sqlite3
from contextlib import contextmanager


@contextmanager
def transaction(conn: sqlite3.Connection):
    if conn.in_transaction:  # nested: the outer transaction owns commit
        yield conn
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise


def rollback(conn: sqlite3.Connection) -> None:
    """Roll back if a transaction is still open.

    SQLite has already rolled back by itself after some errors (disk full,
    interrupt); a second ROLLBACK would then fail and hide the real error.
    A failed COMMIT, on the other hand, leaves the transaction open: rolling
    it back keeps the connection from staying inside it for good.
    """
    if conn.in_transaction:
        conn.execute("ROLLBACK")


@contextmanager
def read_snapshot(conn: sqlite3.Connection):
    """One read transaction, so that a writer between our statements changes nothing
    (a search or an export sees the archive as it was at its first read)."""
    if conn.in_transaction:  # the caller's transaction already is one
        yield conn
        return
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        conn.execute("COMMIT")
