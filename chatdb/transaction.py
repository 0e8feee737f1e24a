"""Write transactions that take the write lock up front.

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
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
