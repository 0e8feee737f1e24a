"""A connection to the archive that can only read: for SQL a person types (`chatdb sql`).

Three locks, each enough alone for a write: the file is opened read-only
(`mode=ro`), `PRAGMA query_only` is on, and an authorizer refuses, before a
statement runs, whatever is not a read: writes and schema changes, ATTACH
(another file, perhaps writable), a PRAGMA that sets anything (query_only
itself, writable_schema) and load_extension(). A refusal says which, in one
line (ReadOnlyRefusal).
"""

import sqlite3
from pathlib import Path

from sqlcipher3 import dbapi2 as sqlcipher

from ..encryption.unlocking import key_for, unlock
from ..errors import ChatdbError
from . import dbapi

BUSY_TIMEOUT_MS = 30_000

# Pragmas that only report, with or without an argument (a table's name).
READING_PRAGMAS = frozenset({
    "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
    "foreign_key_list", "database_list", "collation_list", "function_list", "module_list",
    "pragma_list", "compile_options", "integrity_check", "quick_check", "foreign_key_check",
})
# Pragmas that report without an argument (with one they would set).
REPORTING_PRAGMAS = frozenset({
    "page_count", "page_size", "freelist_count", "user_version", "schema_version", "encoding",
    "journal_mode", "auto_vacuum", "application_id", "data_version", "query_only",
})
WRITES = {
    code: what for what, names in {
        "a write": ("INSERT", "UPDATE", "DELETE"),
        "a schema change": ("CREATE_INDEX", "CREATE_TABLE", "CREATE_TEMP_INDEX",
                            "CREATE_TEMP_TABLE", "CREATE_TEMP_TRIGGER", "CREATE_TEMP_VIEW",
                            "CREATE_TRIGGER", "CREATE_VIEW", "DROP_INDEX", "DROP_TABLE",
                            "DROP_TEMP_INDEX", "DROP_TEMP_TABLE", "DROP_TEMP_TRIGGER",
                            "DROP_TEMP_VIEW", "DROP_TRIGGER", "DROP_VIEW", "ALTER_TABLE",
                            "CREATE_VTABLE", "DROP_VTABLE", "REINDEX", "ANALYZE"),
        "ATTACH or DETACH (only this archive is read)": ("ATTACH", "DETACH"),
    }.items() for code in (getattr(sqlite3, f"SQLITE_{name}") for name in names)
}
SCHEMA_TABLES = ("sqlite_master", "sqlite_temp_master")
REFUSED_FUNCTIONS = {"load_extension": "load_extension() (no extension is loaded)"}


class ReadOnlyRefusal(ChatdbError):
    """A statement that would change something, or read beyond the archive."""


class _Refusing:
    """Remembers why the authorizer last refused, for the error to say."""
    refused: "str | None" = None

    def authorize(self, action: int, arg1, arg2, database, trigger) -> int:
        why = _refusal(action, arg1, arg2)
        if why is None:
            return sqlite3.SQLITE_OK
        self.refused = why
        return sqlite3.SQLITE_DENY


class ReadOnlyConnection(_Refusing, sqlite3.Connection):
    """A plain archive's."""


class EncryptedReadOnlyConnection(_Refusing, sqlcipher.Connection):
    """An encrypted archive's (its key applied before the authorizer is set)."""


def connect_read_only(path: Path) -> ReadOnlyConnection:
    """The archive at `path`, for reading only; statements refused raise ReadOnlyRefusal."""
    key, salt = key_for(Path(path))
    if key:
        driver, factory = sqlcipher, EncryptedReadOnlyConnection
    else:
        driver, factory = sqlite3, ReadOnlyConnection
    conn = driver.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True,
                          timeout=BUSY_TIMEOUT_MS / 1000, factory=factory)
    if key:
        unlock(conn, key, salt, Path(path))
    conn.execute("PRAGMA query_only = ON")
    conn.set_authorizer(conn.authorize)
    return conn


def _refusal(action: int, arg1, arg2) -> "str | None":
    if action == sqlite3.SQLITE_UPDATE and arg1 == "sqlite_master":
        # What FTS5 asks for as it opens its index; the schema itself cannot be written
        # without writable_schema, which is refused (and query_only stops it anyway).
        return None
    if action == sqlite3.SQLITE_ATTACH and not arg1:
        return "VACUUM (it rewrites the file)"   # VACUUM attaches a temporary database
    if action in WRITES:
        return "a schema change" if arg1 in SCHEMA_TABLES else WRITES[action]
    if action == sqlite3.SQLITE_PRAGMA:
        name = (arg1 or "").lower()
        if name in READING_PRAGMAS or (name in REPORTING_PRAGMAS and arg2 is None):
            return None
        return f"PRAGMA {name}{'' if arg2 is None else ' = ' + str(arg2)} (it sets, or is not known to only read)"
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in REFUSED_FUNCTIONS:
        return REFUSED_FUNCTIONS[arg2.lower()]
    return None


def execute(conn: ReadOnlyConnection, sql: str, params=()) -> sqlite3.Cursor:
    """Run one statement; ReadOnlyRefusal for one refused, or for SQL that is not valid."""
    conn.refused = None
    try:
        return conn.execute(sql, params)
    except (*dbapi.DatabaseError, *dbapi.ProgrammingError, *dbapi.Warning) as exc:
        if conn.refused:
            raise ReadOnlyRefusal(f"refused: {conn.refused}; chatdb sql only reads") from None
        if "readonly" in str(exc) or "read-only" in str(exc):
            raise ReadOnlyRefusal(f"refused: a write ({exc}); chatdb sql only reads") from None
        raise ReadOnlyRefusal(f"bad query: {exc}") from None
