"""Schema migrations: migrations/NNNN_name.sql, applied in order, one transaction each.

Each applied file is recorded with its SHA-256. A database that records a
migration this code does not have is newer than the code: refused before
anything is written. A recorded migration whose file has changed since is
reported as an error, never re-run.
"""

import hashlib
import re
import sqlite3
from dataclasses import dataclass
from importlib import resources

from ..clock import now
from ..errors import SchemaError
from . import dbapi
from .transaction import transaction

FILENAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
AFTER_SEMICOLON = re.compile(r"(?<=;)")

CREATE_LEDGER = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    checksum   TEXT NOT NULL,
    applied_at TEXT NOT NULL
)"""
LEDGER_EXISTS = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
ANY_TABLE = "SELECT 1 FROM sqlite_master WHERE type = 'table' LIMIT 1"
APPLIED = "SELECT version, name, checksum FROM schema_migrations ORDER BY version"
APPLIED_VERSION = "SELECT 1 FROM schema_migrations WHERE version = ?"
RECORD = "INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (?, ?, ?, ?)"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def available(package: str = "migrations") -> list[Migration]:
    found = []
    for entry in resources.files(package).iterdir():
        match = FILENAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text("utf-8")))
    return sorted(found, key=lambda m: m.version)


def pending(conn: sqlite3.Connection, migrations: list[Migration]) -> list[Migration]:
    """Check the database against the code (reads only); return what is left to apply.

    The reads share one snapshot: another process may apply a migration
    between two autocommit reads, and a ledger seen missing and then tables
    seen present would make a new archive look like a foreign file.
    """
    if conn.in_transaction:
        return _pending(conn, migrations)
    conn.execute("BEGIN")
    try:
        return _pending(conn, migrations)
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")  # nothing was written: ends the read


def _pending(conn: sqlite3.Connection, migrations: list[Migration]) -> list[Migration]:
    if conn.execute(LEDGER_EXISTS).fetchone() is None:
        if conn.execute(ANY_TABLE).fetchone() is not None:
            raise SchemaError("this SQLite file is not a chatdb archive (no schema_migrations table)")
        return list(migrations)
    known = {m.version: m for m in migrations}
    applied = conn.execute(APPLIED).fetchall()
    for version, name, checksum in applied:
        if version not in known:
            raise SchemaError(
                f"the archive's schema (migration {version:04d}_{name}) is newer than this "
                "chatdb; upgrade chatdb to open it"
            )
        if known[version].checksum != checksum:
            raise SchemaError(
                f"migration {version:04d}_{name}.sql has changed since it was applied to this "
                "archive; restore the original file and put changes in a new migration"
            )
    done = {row[0] for row in applied}
    return [m for m in migrations if m.version not in done]


def apply(conn: sqlite3.Connection, migration: Migration) -> bool:
    """Apply one migration in its own transaction; False if another process beat us to it."""
    with transaction(conn):
        conn.execute(CREATE_LEDGER)
        if conn.execute(APPLIED_VERSION, (migration.version,)).fetchone():
            return False
        try:
            for statement in statements(migration.sql):
                conn.execute(statement)
        except dbapi.Error as exc:
            raise SchemaError(f"migration {migration.version:04d}_{migration.name}.sql "
                              f"failed, nothing of it was applied: {exc}") from None
        conn.execute(RECORD, (migration.version, migration.name, migration.checksum, now()))
    return True


def statements(sql: str):
    """Split a script into statements (triggers included) for execute().

    Cut after every ';' that ends a complete statement, so that two statements
    on one line are two statements, and a ';' inside a string, a comment or a
    trigger body cuts nothing.
    """
    buffer = ""
    for piece in AFTER_SEMICOLON.split(sql):
        buffer += piece
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                yield buffer.strip()
            buffer = ""
    if buffer.strip() and not all(l.strip().startswith("--") or not l.strip()
                                  for l in buffer.splitlines()):
        raise SchemaError(f"incomplete SQL statement at the end of a migration: {buffer[:60]!r}")
