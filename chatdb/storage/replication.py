"""While Litestream replicates an archive, Litestream alone checkpoints its WAL.

Litestream copies the WAL as it grows and keeps its own place in it; a checkpoint
that some other process forces (FULL, RESTART or TRUNCATE, as chatdb's own
after dropping KV) restarts the log behind its back, and its documentation asks
applications to leave checkpoints to it and to turn SQLite's automatic ones
off. So `chatdb replicate` holds an advisory lock on a file beside the archive
for as long as it runs, and while that lock is held chatdb's connections open
with wal_autocheckpoint = 0 and its own checkpoints are skipped. A Litestream
run as a service, outside `chatdb replicate`, says so with $CHATDB_LITESTREAM=1.
"""

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path

from ..errors import ChatdbError

ENV = "CHATDB_LITESTREAM"


def lock_path(db_path: Path) -> Path:
    return Path(db_path).with_name(f".{Path(db_path).name}.replicating")


def is_replicated(db_path: "Path | None") -> bool:
    """Whether Litestream replicates the archive at `db_path` now."""
    if os.environ.get(ENV) == "1":
        return True
    if db_path is None or str(db_path) == ":memory:":
        return False
    try:
        fd = os.open(lock_path(db_path), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)   # and with it the shared lock, if this took one


@contextmanager
def replicating(db_path: Path):
    """Mark the archive as replicated for the block (one `chatdb replicate` at a time)."""
    fd = os.open(lock_path(db_path), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ChatdbError(f"{db_path}: another `chatdb replicate` replicates it already") from None
        yield
    finally:
        os.close(fd)
