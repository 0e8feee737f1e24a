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

import time
from dataclasses import dataclass
from pathlib import Path

from ..encryption.unlocking import blank_like
from ..errors import BadInput, ChatdbError
from . import dbapi, whole_files
from .connection import write_failure

PARTIAL = ".partial"
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
    started = time.monotonic()
    temporary = None
    try:
        temporary = whole_files.temporary_beside(destination, PARTIAL)
        _copy(conn, temporary, kv)
        whole_files.put_in_place(temporary, destination)
    except BaseException as exc:
        if temporary is not None:
            whole_files.remove(temporary)
        if isinstance(exc, (OSError, *dbapi.Error)):
            raise ChatdbError(_failure(destination, exc)) from None
        raise
    return Copied(destination, destination.stat().st_size, time.monotonic() - started, kv,
                  conn.encrypted)


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
    return (f"{destination}: no backup written: {write_failure(exc, destination)}; "
            "the archive is untouched")
