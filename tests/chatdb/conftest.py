"""Fixtures for the archive core: temporary migration packages, database checks."""

import importlib
import uuid

import pytest

from chatdb.storage.migrate import available


@pytest.fixture
def initial_sql():
    """The text of the real migrations/0001_initial.sql."""
    return available()[0].sql


@pytest.fixture
def migrations_package(tmp_path, monkeypatch):
    """make(files) -> the name of an importable package holding `files` (name -> SQL).

    Call it again with the same name to add or rewrite files in that package.
    """
    root = tmp_path / "packages"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))

    def make(files: dict, name: "str | None" = None) -> str:
        name = name or f"migrations_{uuid.uuid4().hex}"
        package = root / name
        package.mkdir(exist_ok=True)
        (package / "__init__.py").touch()
        for filename, sql in files.items():
            (package / filename).write_text(sql, "utf-8")
        importlib.invalidate_caches()
        return name

    return make


@pytest.fixture
def assert_sound():
    """assert_sound(conn): integrity_check is ok and foreign_key_check is empty."""

    def check(conn):
        assert conn.execute("PRAGMA integrity_check").fetchall()[0][0] == "ok"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        # The full-text index agrees with its copy of the text.
        conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")

    return check
