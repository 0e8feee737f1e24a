"""A consistent copy of a live archive: SQLite's online backup API, checked, then renamed into place.

The copy is taken in one step of the backup API, that is in one read transaction:
in WAL mode other processes go on writing meanwhile, and the copy is the archive
as it was when the step began (a step-by-step backup would restart at every
write another process commits, and might never end). It is written to a
temporary file beside the destination, checked with integrity_check, synced and
only then renamed over it: the destination is always a whole archive, the old
one or the new. An encrypted archive's copy is encrypted with the same key
(a salt of its own); `kv=False` leaves out the model's KV state, for a small
copy of the text alone. Restoring is opening the copy.
"""

import errno
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from . import dbapi, private_files
from .connection import blank_like, describe, disk_full
from .errors import BadInput, ChatdbError

PARTIAL = ".partial"
SQLITE_IOERR, SQLITE_FULL = 10, 13
# What --no-kv leaves out; the triggers keep kv_totals right as they go.
DROP_KV = ("DELETE FROM kv_segments", "DELETE FROM kv_shared_rows", "DELETE FROM kv_uses")


@dataclass(frozen=True)
class Copied:
    path: Path
    bytes: int
    seconds: float
    kv: bool
    encrypted: bool


def backup(conn, source: Path, destination: Path, *, kv: bool = True) -> Copied:
    """Copy the archive open on `conn` (at `source`) to `destination`, whole or not at all."""
    destination = Path(destination)
    _check_destination(source, destination)
    _remove_stale(destination)
    started = time.monotonic()
    temporary = destination.with_name(
        f".{destination.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}{PARTIAL}")
    try:
        private_files.create(temporary)
        _copy(conn, temporary, kv)
        _sync(temporary)
        os.replace(temporary, destination)
        _sync_directory(destination.parent)
    except BaseException as exc:
        _remove(temporary)
        if isinstance(exc, (OSError, *dbapi.Error)):
            raise ChatdbError(_failure(destination, exc)) from None
        raise
    return Copied(destination, destination.stat().st_size, time.monotonic() - started, kv,
                  getattr(conn, "encrypted", False))


def _copy(conn, temporary: Path, kv: bool) -> None:
    copy = blank_like(conn, temporary)
    try:
        conn.backup(copy)   # pages=-1: one step, one snapshot
        if not kv:
            for statement in DROP_KV:
                copy.execute(statement)
            copy.execute("VACUUM")
        found = copy.execute("PRAGMA integrity_check").fetchone()[0]
        if found != "ok":
            raise ChatdbError(f"the copy failed SQLite's integrity_check ({found})")
        copy.execute("PRAGMA journal_mode = DELETE")   # the copy is one file, no -wal beside it
    finally:
        copy.close()


def _check_destination(source: Path, destination: Path) -> None:
    if destination.is_dir():
        raise BadInput(f"{destination}: a directory; give the backup's file name")
    if destination.exists() and destination.resolve() == Path(source).resolve():
        raise BadInput(f"{destination}: that is the archive itself; give another file")
    if not destination.parent.is_dir():
        raise BadInput(f"{destination.parent}: no such directory")


def _failure(destination: Path, exc: BaseException) -> str:
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    if code == SQLITE_FULL or getattr(exc, "errno", None) in (errno.ENOSPC, errno.EFBIG) \
            or disk_full(destination):
        reason = "the disk is full"
    elif code == SQLITE_IOERR:   # a write past the file-size limit (EFBIG) says only this
        reason = f"a write failed ({exc}: the disk may be full)"
    elif isinstance(exc, dbapi.Error):
        reason = describe(exc)
    else:
        reason = exc.strerror or str(exc)
    return f"{destination}: no backup written: {reason}; the archive is untouched"


def _remove_stale(destination: Path) -> None:
    """Temporary files a killed backup to the same file left (their process is gone)."""
    for leftover in destination.parent.glob(f".{destination.name}.*{PARTIAL}"):
        pid = leftover.name[len(destination.name) + 2:].split(".", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            _remove(leftover)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove(path: Path) -> None:
    for each in (path, *(path.with_name(path.name + s) for s in ("-journal", "-wal", "-shm"))):
        each.unlink(missing_ok=True)


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_directory(directory: Path) -> None:
    """The rename itself on disk (a crash right after it keeps the new name)."""
    _sync(directory)
