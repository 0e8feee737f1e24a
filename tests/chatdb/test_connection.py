"""Opening the archive: pragmas, file mode, where it lives; write transactions."""

import os
import sqlite3
import stat

import pytest

from chatdb.archive import Archive
from chatdb.paths import default_db_path
from chatdb.storage.connection import connect


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def open_umask():
    """A umask that would leave new files world-readable: the 0600 must come from chatdb."""
    old = os.umask(0)
    yield
    os.umask(old)


def pragmas(conn) -> dict:
    return {name: conn.execute(f"PRAGMA {name}").fetchone()[0]
            for name in ("journal_mode", "foreign_keys", "busy_timeout", "synchronous")}


def test_pragmas_on_every_connection(db_path):
    first = connect(db_path)  # creates and migrates
    second = connect(db_path)  # opens an existing archive
    with Archive.open(db_path) as archive:
        for conn in (first, second, archive.conn):
            got = pragmas(conn)
            assert got["journal_mode"] == "wal"
            assert got["foreign_keys"] == 1
            assert got["busy_timeout"] > 0
            assert got["synchronous"] == 1  # NORMAL
    first.close()
    second.close()


def test_foreign_keys_are_enforced(archive):
    with pytest.raises(sqlite3.IntegrityError):
        archive.conn.execute(
            "INSERT INTO message_tokens (message_id, tokenizer_id, n_tokens, tokens) "
            "VALUES (424242, 't', 0, x'')")


def test_new_file_is_private(tmp_path, open_umask):
    path = tmp_path / "new" / "deeper" / "chats.db"
    with Archive.open(path) as archive:
        archive.create_conversation("secret")
        assert mode(path) == 0o600
        for suffix in ("-wal", "-shm"):
            side = path.with_name(path.name + suffix)
            assert side.exists() and mode(side) == 0o600
    assert mode(path) == 0o600
    assert mode(path.parent) == mode(path.parent.parent) == 0o700  # every level made


def test_an_open_archive_is_tightened_once_and_said(db_path, open_umask):
    with Archive.open(db_path) as archive:
        archive.create_conversation("secret")  # leaves a WAL and its index
        sides = [db_path.with_name(db_path.name + s) for s in ("-wal", "-shm")]
        for path in (db_path, *sides):
            os.chmod(path, 0o644)
    os.chmod(db_path, 0o640)
    with Archive.open(db_path) as archive:
        changed = {t.path: t.old_mode for t in archive.tightened}
        assert changed[db_path] == 0o640  # (SQLite gives its side files the file's mode)
        assert set(changed) == {db_path, *(side for side in sides if side.exists())}
        assert "readable by its owner only (0600)" in str(archive.tightened[0])
        assert [c.title for c in archive.list_conversations()] == ["secret"]
    assert mode(db_path) == 0o600 and all(mode(s) == 0o600 for s in sides if s.exists())
    with Archive.open(db_path) as archive:
        assert archive.tightened == []


def test_owner_bits_are_kept_when_tightening(db_path, open_umask):
    from chatdb.storage import private_files

    db_path.write_bytes(b"")
    os.chmod(db_path, 0o444)  # read-only on purpose: stays read-only for its owner
    assert [t.old_mode for t in private_files.tighten(db_path)] == [0o444]
    assert mode(db_path) == 0o400


def test_a_file_that_is_not_an_archive_keeps_its_mode(db_path, open_umask):
    from chatdb.errors import SchemaError

    with sqlite3.connect(db_path) as other:
        other.execute("CREATE TABLE notes (x)")
    other.close()
    os.chmod(db_path, 0o644)
    with pytest.raises(SchemaError):
        Archive.open(db_path)
    assert mode(db_path) == 0o644


def test_default_path_follows_chatdb_db_then_xdg(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CHATDB_DB", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert default_db_path() == home / ".local" / "share" / "chatdb" / "chatdb.db"

    monkeypatch.setenv("XDG_DATA_HOME", "")  # empty counts as unset
    assert default_db_path() == home / ".local" / "share" / "chatdb" / "chatdb.db"

    xdg = tmp_path / "xdg"
    monkeypatch.setenv("XDG_DATA_HOME", str(xdg))
    assert default_db_path() == xdg / "chatdb" / "chatdb.db"

    chosen = tmp_path / "elsewhere" / "mine.db"
    monkeypatch.setenv("CHATDB_DB", str(chosen))
    assert default_db_path() == chosen


def test_open_without_a_path_creates_the_default_file(tmp_path, monkeypatch, open_umask):
    xdg = tmp_path / "xdg"
    monkeypatch.setenv("XDG_DATA_HOME", str(xdg))
    monkeypatch.delenv("CHATDB_DB", raising=False)
    with Archive.open() as archive:
        archive.create_conversation("here")
        assert archive.db_path == xdg / "chatdb" / "chatdb.db"
    path = xdg / "chatdb" / "chatdb.db"
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    with Archive.open(path) as archive:
        assert [c.title for c in archive.list_conversations()] == ["here"]

    chosen = tmp_path / "by_env.db"
    monkeypatch.setenv("CHATDB_DB", str(chosen))
    with Archive.open() as archive:
        assert archive.count_conversations() == 0
    assert chosen.exists() and mode(chosen) == 0o600


def test_memory_database_works():
    conn = connect(":memory:")
    archive = Archive(conn)
    conv = archive.create_conversation("in memory", system_prompt="sys")
    archive.add_message(conv.id, "user", "hi")
    assert [m.role for m in archive.messages(conv.id)] == ["system", "user"]
    archive.close()


# -- transactions --------------------------------------------------------------


def other_connection_sees(db_path, sql, *args):
    with sqlite3.connect(db_path) as other:
        result = other.execute(sql, args).fetchall()
    other.close()
    return result


def test_error_in_a_transaction_rolls_everything_back(archive, db_path):
    with pytest.raises(RuntimeError):
        with archive.transaction():
            conv = archive.create_conversation("doomed", system_prompt="sys")  # nested
            archive.add_message(conv.id, "user", "one")
            raise RuntimeError("stop")
    assert not archive.conn.in_transaction
    assert archive.count_conversations() == 0 and archive.count_messages() == 0
    assert archive.conn.execute("SELECT count(*) FROM messages_fts").fetchone()[0] == 0


def test_nested_writes_commit_with_the_outer_transaction(archive, db_path):
    with archive.transaction():
        conv = archive.create_conversation("together")
        archive.add_message(conv.id, "user", "one")
        assert other_connection_sees(db_path, "SELECT count(*) FROM messages") == [(0,)]
    assert other_connection_sees(db_path, "SELECT count(*) FROM messages") == [(1,)]


def test_interrupt_reports_the_real_error_and_leaves_the_archive_usable(archive, db_path):
    """An interrupted write (Ctrl-C calls conn.interrupt()) makes SQLite roll the
    whole transaction back by itself: a second ROLLBACK must not replace
    "interrupted" with "cannot rollback - no transaction is active"."""
    conv = archive.create_conversation("kept")
    archive.conn.create_function("interrupt_now", 0, lambda: archive.conn.interrupt() or 1)
    with pytest.raises(sqlite3.OperationalError, match="interrupted"):
        with archive.transaction():
            archive.add_message(conv.id, "user", "lost")
            archive.conn.execute("UPDATE messages SET meta = meta WHERE interrupt_now()")
    assert not archive.conn.in_transaction
    assert archive.messages(conv.id) == []
    archive.add_message(conv.id, "user", "after")
    assert other_connection_sees(db_path, "SELECT content FROM messages") == [("after",)]


def test_disk_full_reports_the_real_error_and_leaves_the_archive_usable(archive, db_path):
    conv = archive.create_conversation("kept")
    pages = archive.conn.execute("PRAGMA page_count").fetchone()[0]
    archive.conn.execute(f"PRAGMA max_page_count = {pages + 8}")
    with pytest.raises(sqlite3.OperationalError, match="full"):
        with archive.transaction():
            message = archive.add_message(conv.id, "user", "with a big KV")
            archive.kv.put(message.id, "fp", "rows", 10, os.urandom(1 << 20))
    assert not archive.conn.in_transaction
    assert archive.messages(conv.id) == []
    archive.conn.execute("PRAGMA max_page_count = 1073741823")
    archive.add_message(conv.id, "user", "after")
    assert other_connection_sees(db_path, "SELECT content FROM messages") == [("after",)]


def test_failed_commit_does_not_leave_the_connection_inside_a_transaction(archive, db_path):
    conv = archive.create_conversation("c")
    with pytest.raises(sqlite3.IntegrityError):
        with archive.transaction():
            archive.conn.execute("PRAGMA defer_foreign_keys = ON")
            archive.add_message(conv.id, "user", "lost with the failed commit")
            archive.conn.execute(
                "INSERT INTO message_tokens (message_id, tokenizer_id, n_tokens, tokens) "
                "VALUES (424242, 't', 0, x'')")  # checked only at COMMIT
    assert not archive.conn.in_transaction
    archive.add_message(conv.id, "user", "committed")
    assert other_connection_sees(db_path, "SELECT content FROM messages") == [("committed",)]


def test_new_archive_has_large_pages_for_kv_blobs(archive):
    from chatdb.storage.connection import PAGE_SIZE
    assert archive.conn.execute("PRAGMA page_size").fetchone()[0] == PAGE_SIZE
