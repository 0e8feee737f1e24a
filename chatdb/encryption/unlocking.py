"""Opening an encrypted archive: SQLCipher's connection class, the key, a wrong or missing key.

chatdb/storage/connection.py opens every archive; what it does differently for an encrypted
one (see chatdb/encryption/cipher.py) is here.
"""

import sqlite3
from pathlib import Path

from sqlcipher3 import dbapi2 as sqlcipher

from ..errors import BadInput, SchemaError
from . import cipher

SQLITE_NOTADB = 26


class HeldFile:
    """A connection that tells cipher.salt_of, while it is open, not to open its file."""
    file_id = None

    def close(self) -> None:
        super().close()
        cipher.release(self.file_id)
        self.file_id = None


class EncryptedConnection(HeldFile, sqlcipher.Connection):
    """A connection to an encrypted archive (SQLCipher), with the key it was opened with;
    read_only as connection.ArchiveConnection's."""
    read_only = False
    encrypted = True
    key: "cipher.Key | None" = None

    def blobopen(self, table: str, column: str, row: int, /, *, readonly: bool = False,
                 name: str = "main"):
        """Python's sqlite3 name for the incremental blob reader sqlcipher3 calls open_blob."""
        return self.open_blob(table, column, row, readonly=readonly, dbname=name)


def blank_like(conn: sqlite3.Connection, path: Path) -> sqlite3.Connection:
    """A connection to a new, empty file at `path` that `conn.backup()` can fill: the same
    driver as `conn`, and so encrypted with the same key (and a salt of its own)."""
    return blank(path, conn.key)


def blank(path: Path, key: "cipher.Key | None") -> sqlite3.Connection:
    """A bare connection to a new file at `path`: plain, or encrypted with `key`."""
    if key is None:
        return sqlite3.connect(str(path), isolation_level=None)
    conn = sqlcipher.connect(str(path), isolation_level=None, factory=EncryptedConnection)
    try:
        unlock(conn, key, None, path)
        conn.key = key
    except BaseException:
        conn.close()
        raise
    return conn


def key_for(path: Path) -> "tuple[cipher.Key | None, bytes | None]":
    """(key, salt) for `path`: (None, None) for a plain file, (key, None) for a new one."""
    if str(path) == ":memory:":
        return None, None
    salt, key = cipher.salt_of(path), cipher.current()
    if salt is not None and key is None:
        raise KeyNeeded(f"{path}: an encrypted archive (or a damaged file): give its key in "
                        f"${cipher.ENV} or a file named by --key-file (or type it when chatdb "
                        "asks, at a terminal)")
    if salt is None and key is not None and is_blank(path):
        return key, None
    return (key, salt) if salt is not None else (None, None)


def is_blank(path: Path) -> bool:
    try:
        return path.stat().st_size == 0
    except FileNotFoundError:
        return True


def unlock(conn, key: "cipher.Key", salt: "bytes | None", path: Path) -> None:
    """Give a new SQLCipher connection the key of the file at `path` (its salt), or of a new
    file (None), and test it with the first read: KeyNeeded if it does not open the file."""
    conn.execute("PRAGMA cipher_log_level = NONE")   # a wrong key is chatdb's one line, not a log
    try:
        for pragma in key.pragmas(salt):
            conn.execute(pragma)
        if salt is not None:   # the first read is the key's test
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlcipher.DatabaseError as exc:
        if exc.sqlite_errorcode & 0xFF != SQLITE_NOTADB:
            raise
        raise KeyNeeded(f"{path}: the key does not open this archive (a wrong key, or not a "
                        f"chatdb archive): check ${cipher.ENV} or the key file") from None


class KeyNeeded(BadInput, SchemaError):
    """An encrypted archive without its key, or with another: nothing was read or written."""
