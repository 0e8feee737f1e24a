"""Opening the archive: file mode, pragmas, and the schema check."""

import os
import sqlite3
from pathlib import Path

from .errors import SchemaError
from .migrate import apply, available, pending

BUSY_TIMEOUT_MS = 30_000

# Set before the schema check: none of these writes to the file.
PRAGMAS = (
    "PRAGMA foreign_keys = ON",
    f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}",
    "PRAGMA synchronous = NORMAL",
)


def connect(path: "str | Path") -> sqlite3.Connection:
    """Open (creating if needed) the archive at `path`, migrated to the code's schema.

    A new file is created 0600: chats are private. The connection is in
    autocommit mode; write through `transaction()`.
    """
    path = Path(path)
    if str(path) != ":memory:":
        _create_private(path)
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    conn.row_factory = sqlite3.Row
    try:
        for pragma in PRAGMAS:
            conn.execute(pragma)
        todo = pending(conn, available())  # refuses a newer schema before any write
        conn.execute("PRAGMA journal_mode = WAL")
        for migration in todo:
            apply(conn, migration)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise SchemaError(f"{path}: not a usable chatdb archive ({exc})") from None
    except SchemaError:
        conn.close()
        raise
    return conn


def _create_private(path: Path) -> None:
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(fd)
    except FileExistsError:
        pass  # another process created it first
