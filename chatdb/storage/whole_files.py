"""A database file written whole under a temporary name beside its destination, then renamed.

The temporary name carries the writer's pid: one a killed writer left is
removed by the next writer to the same destination, once that pid is gone.
"""

import os
import uuid
from pathlib import Path

from . import private_files

JOURNALS = ("-journal", "-wal", "-shm")


def temporary_beside(destination: Path, suffix: str) -> Path:
    """A new private, empty file beside `destination` (stale ones of killed writers removed)."""
    _remove_stale(destination, suffix)
    temporary = destination.with_name(
        f".{destination.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}{suffix}")
    private_files.create(temporary)
    return temporary


def put_in_place(temporary: Path, destination: Path) -> None:
    """Sync `temporary`, rename it to `destination`, and sync the rename itself."""
    _sync(temporary)
    os.replace(temporary, destination)
    _sync(destination.parent)


def remove(path: Path) -> None:
    """`path` and any journal SQLite left beside it."""
    for each in (path, *(path.with_name(path.name + journal) for journal in JOURNALS)):
        each.unlink(missing_ok=True)


def _remove_stale(destination: Path, suffix: str) -> None:
    for leftover in destination.parent.glob(f".{destination.name}.*{suffix}"):
        pid = leftover.name[len(destination.name) + 2:].split(".", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            remove(leftover)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:   # someone else's: alive
        return True
    return True


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
