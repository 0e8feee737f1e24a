"""Opening the archive: file mode, pragmas, the schema check, and giving freed space back.

An archive is in incremental auto-vacuum, so that the space freed by deleted
chats and dropped KV can be cut off the end of the file (chatdb.kv.keeping)
instead of staying in it for good. A new file is made so; an archive made
before is converted once when opened (a VACUUM, which cannot run inside a
migration's transaction), and `connect` says so in `notes`.
"""

import errno
import os
import sqlite3
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

from sqlcipher3 import dbapi2 as sqlcipher

from .. import content_hash
from ..encryption import cipher
from ..encryption.unlocking import EncryptedConnection, HeldFile, KeyNeeded, key_for, unlock
from ..errors import ChatdbError, SchemaError
from . import dbapi, private_files, replication
from .migrate import Migration, apply, available, pending

BUSY_TIMEOUT_MS = 30_000
# KV segments are megabytes each: with 32 KiB pages SQLite follows 8x fewer
# overflow pages, and reads them 1.8x faster than with the default 4 KiB.
PAGE_SIZE = 32768

# A write-ahead log that grew past this (a long chat's KV in one transaction) is cut back
# to it once checkpointed, instead of keeping its largest size for good.
WAL_SIZE_LIMIT = 32 << 20
INCREMENTAL = 2   # PRAGMA auto_vacuum: 0 none, 1 full, 2 incremental

# Set before the schema check: none of these writes to the file.
PRAGMAS = (
    "PRAGMA foreign_keys = ON",
    f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}",
    "PRAGMA synchronous = NORMAL",
    f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}",
)

SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY, SQLITE_CORRUPT, SQLITE_CANTOPEN = 5, 6, 8, 11, 14
SQLITE_NOTADB = 26
SQLITE_IOERR, SQLITE_FULL = 10, 13


def connect(path: "str | Path", migrations: "list[Migration] | None" = None,
            notes: "list[str] | None" = None) -> sqlite3.Connection:
    """Open (creating if needed) the archive at `path`, migrated to the code's schema.

    A new file is created 0600 (its directories 0700): chats are private. The connection is in
    autocommit mode; write through `transaction()`. `migrations` defaults to
    the files in the `migrations` package (tests pass their own).

    An archive this code must not open (newer schema, changed migration, not
    a chatdb file) is refused with SchemaError before anything is written.
    What the user should hear once (an archive converted) is added to `notes`.
    """
    path = Path(path)
    if migrations is None:
        migrations = available()
    if str(path) == ":memory:":
        return _open_writable(path, migrations, [])
    _create_new(path, migrations)
    if path.is_file() and path.stat().st_size == 0:
        raise SchemaError(f"{path}: an empty file, not a chatdb archive (remove it, and chatdb "
                          "makes a new archive there)")
    if _wal_has_content(path):
        # Closing a connection that may write checkpoints this WAL into
        # the file: look at the schema through one that cannot, first.
        with _refusals(path):
            check = _open(path, "mode=ro")
            try:
                pending(check, migrations)
            finally:
                check.close()
    try:
        conn = _open_writable(path, migrations, notes if notes is not None else [])
    except SchemaError as exc:
        if not (_read_only(exc.__context__) or disk_full(path)):
            raise
        return _open_read_only(path, migrations)
    if replication.is_replicated(path):
        conn.execute("PRAGMA wal_autocheckpoint = 0")   # Litestream checkpoints, not chatdb
    return conn


def _open_writable(path: Path, migrations: "list[Migration]", notes: "list[str]") -> sqlite3.Connection:
    with _refusals(path):
        conn = _open(path)
        try:
            todo = pending(conn, migrations)  # refuses a newer schema before any write
            if conn.execute("PRAGMA page_count").fetchone()[0] == 0:
                # Only a new, empty file can take them (and only before WAL).
                conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
                conn.execute(f"PRAGMA auto_vacuum = {INCREMENTAL}")
            _enable_wal(conn)
            for migration in todo:
                apply(conn, migration)
            if str(path) != ":memory:":
                _convert_to_incremental_vacuum(conn, path, notes)
        except BaseException:
            conn.close()
            raise
    return conn


def _convert_to_incremental_vacuum(conn: sqlite3.Connection, path: Path, notes: "list[str]") -> None:
    """An archive made before chatdb gave freed space back is rewritten once (VACUUM: it
    needs about the file's size free on the disk, and a while for a large archive)."""
    if conn.execute("PRAGMA auto_vacuum").fetchone()[0] == INCREMENTAL:
        return
    conn.execute(f"PRAGMA auto_vacuum = {INCREMENTAL}")   # takes effect with the VACUUM
    started = time.monotonic()
    try:
        conn.execute("VACUUM")
    except dbapi.OperationalError as exc:   # locked all along, or the disk is full: next time
        notes.append(f"{path}: not yet converted to give freed space back to the disk ({exc}); "
                     "chatdb tries again next time")
        return
    notes.append(f"{path}: converted once (in {time.monotonic() - started:.1f} s) so that the space "
                 "deleted chats and dropped KV free goes back to the disk")


def _open_read_only(path: Path, migrations: "list[Migration]") -> sqlite3.Connection:
    """An archive in a directory chatdb cannot write, or on a full disk (SQLite cannot
    make or grow its -shm file there): read as immutable, which is only safe with no
    changes in a WAL."""
    if _wal_has_content(path):
        where = "the disk is full" if disk_full(path) else "its directory is read-only"
        raise ChatdbError(f"{path}: {where} and its WAL file holds changes not yet in the "
                          "archive; it cannot be read safely until it can be written")
    with _refusals(path):
        conn = _open(path, "immutable=1")
        conn.read_only = True
        try:
            if pending(conn, migrations):
                raise SchemaError("read-only, and older than this chatdb (it cannot be upgraded)")
        except BaseException:
            conn.close()
            raise
    return conn


def _read_only(exc: "BaseException | None") -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (SQLITE_READONLY, SQLITE_CANTOPEN)


def describe(exc: "sqlite3.Error", path: "Path | None" = None) -> str:
    """An SQLite error in words a user can act on."""
    if path is not None and disk_full(path):
        return f"the disk is full: the archive can be read but not written ({exc})"
    if _read_only(exc):
        return f"the archive is read-only ({exc})"
    if is_damaged(exc):
        return (f"the archive is damaged ({exc}): `chatdb doctor` runs SQLite's integrity_check "
                "on it; `chatdb export` saves what can still be read")
    return str(exc)


def write_failure(exc: BaseException, path: Path) -> str:
    """Why writing a new file at `path` failed, in words: a full disk above all."""
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    if code == SQLITE_FULL or getattr(exc, "errno", None) in (errno.ENOSPC, errno.EFBIG) \
            or disk_full(path):
        return "the disk is full"
    if code == SQLITE_IOERR:   # a write past the file-size limit (EFBIG) says only this
        return f"a write failed ({exc}: the disk may be full)"
    if isinstance(exc, dbapi.Error):
        return describe(exc)
    return getattr(exc, "strerror", None) or str(exc)


def is_damaged(exc: BaseException) -> bool:
    """SQLite's "database disk image is malformed" (or a page that is no database's)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (SQLITE_CORRUPT, SQLITE_NOTADB)


def disk_full(path: Path) -> bool:
    """Whether the file system holding `path` has no space left for us."""
    try:
        return os.statvfs(Path(path).parent).f_bavail == 0
    except OSError:
        return False


class ArchiveConnection(HeldFile, sqlite3.Connection):
    """A connection that knows whether it was opened read-only (a directory chatdb cannot
    write, a full disk): then every write fails, and a server says so before it serves."""
    read_only = False
    encrypted = False
    key = None   # the cipher.Key of an encrypted one (unlocking.EncryptedConnection)


def _open(path: Path, query: str = "") -> sqlite3.Connection:
    """A connection to the archive file at `path` (with URI parameters `query`): plain, or
    unlocked with the process's key if the file is encrypted (or new, and there is a key)."""
    key, salt = key_for(path)
    driver, factory = (sqlcipher, EncryptedConnection) if key else (sqlite3, ArchiveConnection)
    target = f"{path.resolve().as_uri()}?{query}" if query else str(path)
    conn = driver.connect(target, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                          uri=bool(query), factory=factory)
    conn.row_factory = driver.Row
    if str(path) != ":memory:" and not (key and salt is None):   # a new file's salt is unknown
        conn.file_id = cipher.hold(path, salt)
    content_hash.register(conn)  # the schema's triggers call it
    try:
        if key:
            unlock(conn, key, salt, path)
            conn.key = key
        for pragma in PRAGMAS:
            conn.execute(pragma)
    except BaseException:
        conn.close()
        raise
    return conn


@contextmanager
def _refusals(path: Path):
    """Report why an archive cannot be opened in one line that names the file."""
    try:
        yield
    except KeyNeeded:
        raise   # it names the file
    except SchemaError as exc:
        raise SchemaError(f"{path}: {exc}") from None
    except dbapi.DatabaseError as exc:
        if is_busy(exc):
            raise ChatdbError(f"{path}: the archive stayed locked by another process for "
                              f"{BUSY_TIMEOUT_MS // 1000} s; try again") from None
        raise SchemaError(f"{path}: not a usable chatdb archive ({exc})") from None


def is_busy(exc: BaseException) -> bool:
    """True for SQLite's "database is locked" / "busy" errors."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (SQLITE_BUSY, SQLITE_LOCKED)
    return isinstance(exc, dbapi.OperationalError) and (
        "locked" in str(exc) or "busy" in str(exc))


def _enable_wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL. The switch (on a new file, while other processes open it
    too) can report "database is locked" without waiting on busy_timeout, so
    it is retried here up to that timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = 0.001
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL").fetchone()
            return
        except dbapi.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _wal_has_content(path: Path) -> bool:
    try:
        return path.with_name(path.name + "-wal").stat().st_size > 0
    except FileNotFoundError:
        return False


def _create_new(path: Path, migrations: "list[Migration]") -> None:
    """Make a new archive whole under a temporary name, then link it into place.

    A file at `path` is then always an archive some process finished making
    (or someone else's file): an empty one is never chatdb's half-made
    archive, and is refused. Created 0600: chats are private.
    """
    if path.exists():
        return
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.new")
    try:
        private_files.make_dirs(path.parent)
        os.close(os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_WRONLY, private_files.FILE_MODE))
    except OSError as exc:
        raise ChatdbError(f"{path}: cannot create the archive there ({exc.strerror or exc})") from None
    try:
        _open_writable(temporary, migrations, []).close()  # the last close removes its WAL
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass  # another process made it first: use theirs
    finally:
        for leftover in (temporary, temporary.with_name(temporary.name + "-wal"),
                         temporary.with_name(temporary.name + "-shm")):
            leftover.unlink(missing_ok=True)
