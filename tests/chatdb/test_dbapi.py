"""An archive's connection is Python's sqlite3 or, for an encrypted archive, sqlcipher3: two
sets of exception classes. Code that catches SQLite's errors catches chatdb.storage.dbapi's tuples, or
an encrypted archive's errors pass it by."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("chatdb", "cli", "engine", "server")
# Its own in-memory scratch database, never an archive.
OWN_CONNECTIONS = {"chatdb/search/snippet_window.py"}


def sqlite3_handlers(path: Path) -> "list[int]":
    """Lines of `except` clauses that name an exception class of the sqlite3 module."""
    tree = ast.parse(path.read_text("utf-8"))
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.ExceptHandler)
            and node.type is not None and any(
                isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                and n.value.id == "sqlite3" for n in ast.walk(node.type))]


def test_no_code_catches_only_the_stdlib_drivers_errors():
    found = [f"{path.relative_to(ROOT)}:{line}" for package in PACKAGES
             for path in sorted((ROOT / package).rglob("*.py"))
             if str(path.relative_to(ROOT)) not in OWN_CONNECTIONS
             for line in sqlite3_handlers(path)]
    assert found == [], f"catch chatdb.storage.dbapi's errors (either driver's) instead: {found}"


def test_the_check_finds_such_a_clause(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import sqlite3\ntry:\n    pass\nexcept (sqlite3.Error, OSError):\n    pass\n")
    assert sqlite3_handlers(sample) == [4]
