"""Encrypting, decrypting and rekeying an archive in place, safely.

The archive is never rewritten where it lies. SQLCipher's sqlcipher_export()
copies it, schema and rows, into a new file beside it under the new key (or
none); the copy is checked with integrity_check and synced, and only then
renamed over the archive. A crash or a full disk at any moment leaves the old
file whole, or the new one in its place.

The archive must be this process's alone meanwhile: a process that kept it open
would go on writing into the file renamed away. The conversion takes SQLite's
exclusive lock first and refuses if another process has the archive open; and
it empties the WAL (a checkpoint) under that lock, so that no log of the old
file is left to be applied to the new one.
"""

import time
from dataclasses import dataclass
from pathlib import Path

from sqlcipher3 import dbapi2 as sqlcipher

from .. import content_hash
from ..errors import BadInput, ChatdbError
from ..storage import whole_files
from ..storage.connection import INCREMENTAL, PAGE_SIZE, write_failure
from . import cipher
from .unlocking import unlock

SUFFIX = ".converting"
LOCK_TIMEOUT_S = 2.0
NOT_ENCRYPTED = "{}: the archive is not encrypted (`chatdb encrypt` encrypts it)"


@dataclass(frozen=True)
class Converted:
    path: Path
    bytes: int
    seconds: float
    encrypted: bool


def convert(path: Path, old: "cipher.Key | None", new: "cipher.Key | None") -> Converted:
    """Rewrite the archive at `path` from key `old` to key `new` (None: plain)."""
    path = Path(path)
    if not path.is_file():
        raise BadInput(f"{path}: no archive there")
    salt = cipher.salt_of(path)
    if salt is None and new is None or salt is None and old is not None:
        raise BadInput(NOT_ENCRYPTED.format(path))
    if salt is not None and old is None:
        raise BadInput(f"{path}: the archive is already encrypted (`chatdb rekey` gives it "
                       "another key)" if new is not None else
                       f"{path}: the archive is encrypted: give its key in ${cipher.ENV} or a "
                       "file named by --key-file")
    started = time.monotonic()
    source = _lock(path, old, salt)
    temporary = None
    try:
        temporary = whole_files.temporary_beside(path, SUFFIX)
        _export(source, temporary, new)
        _check(temporary, new)
        _empty_wal(source, path)
        whole_files.put_in_place(temporary, path)
        for old_log in ("-wal", "-shm"):   # the old file's, empty: not the new one's
            path.with_name(path.name + old_log).unlink(missing_ok=True)
    except BaseException as exc:
        if temporary is not None:
            whole_files.remove(temporary)
        if isinstance(exc, (OSError, sqlcipher.Error)):
            raise ChatdbError(_failure(path, exc)) from None
        raise
    finally:
        source.close()
    return Converted(path, path.stat().st_size, time.monotonic() - started, new is not None)


def _lock(path: Path, key: "cipher.Key | None", salt: "bytes | None"):
    """A connection holding the archive's exclusive lock (no other process may have it open)."""
    conn = sqlcipher.connect(str(path), isolation_level=None, timeout=LOCK_TIMEOUT_S)
    try:
        content_hash.register(conn)   # the schema's triggers call it
        if key is not None:
            unlock(conn, key, salt, path)
        conn.execute("PRAGMA locking_mode = EXCLUSIVE")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        conn.execute("COMMIT")   # the lock stays: EXCLUSIVE mode keeps it until close
    except sqlcipher.OperationalError as exc:
        conn.close()
        if "locked" in str(exc) or "busy" in str(exc):
            raise ChatdbError(f"{path}: another process has the archive open (a console, chatdb "
                              "serve): close it and try again; nothing was changed") from None
        raise
    except BaseException:
        conn.close()
        raise
    return conn


def _export(source, temporary: Path, key: "cipher.Key | None") -> None:
    source.execute("ATTACH DATABASE ? AS converted KEY ?",
                   (str(temporary), key.raw(None) if key else ""))
    try:
        if key is not None:
            for setting in cipher.SETTINGS:
                source.execute(f"PRAGMA converted.{setting}")
        source.execute(f"PRAGMA converted.page_size = {PAGE_SIZE}")
        source.execute(f"PRAGMA converted.auto_vacuum = {INCREMENTAL}")
        source.execute("BEGIN IMMEDIATE")
        try:
            source.execute("SELECT sqlcipher_export('converted')").fetchone()
            source.execute("COMMIT")
        except BaseException:
            if source.in_transaction:   # SQLite rolls back by itself on a full disk
                source.execute("ROLLBACK")
            raise
    finally:
        source.execute("DETACH DATABASE converted")


def _check(temporary: Path, key: "cipher.Key | None") -> None:
    conn = sqlcipher.connect(str(temporary), isolation_level=None)
    try:
        if key is not None:
            unlock(conn, key, cipher.salt_of(temporary), temporary)
        found = conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()
    if found != "ok":
        raise ChatdbError(f"the converted copy failed SQLite's integrity_check ({found})")


def _empty_wal(source, path: Path) -> None:
    """Checkpoint the old file's WAL into it and cut it to nothing: no log of the old file
    may be left beside the new one."""
    busy, _, _ = source.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    wal = path.with_name(path.name + "-wal")
    if busy or (wal.exists() and wal.stat().st_size):
        raise ChatdbError(f"{path}: its WAL could not be emptied; nothing was changed")


def _failure(path: Path, exc: BaseException) -> str:
    reason = write_failure(exc, path)
    if reason == "the disk is full":
        reason += " (the conversion needs about the archive's size free)"
    return f"{path}: not converted: {reason}; the archive is as it was"
