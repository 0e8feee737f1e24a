"""Migrations: a new archive, an upgrade, and archives this code must refuse."""

import sqlite3
import subprocess
import sys

import pytest

from chatdb.archive import Archive
from chatdb.errors import SchemaError
from chatdb.kv.store import SegmentRef, encode
from chatdb.storage.connection import connect
from chatdb.storage.migrate import LEDGER_EXISTS, Migration, apply, available, pending, statements

TABLES = {"conversations", "messages", "message_tokens", "kv_segments",
          "file_fingerprints", "messages_fts", "schema_migrations"}

NOTES_0002 = """
-- Notes per conversation; a trigger whose body holds ';' and a string with one.
ALTER TABLE conversations ADD COLUMN notes TEXT NOT NULL DEFAULT '';
CREATE TABLE notes_tags (
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    tag TEXT NOT NULL, PRIMARY KEY (conversation_id, tag)
) WITHOUT ROWID; CREATE INDEX tags_by_tag ON notes_tags(tag);
CREATE TRIGGER tag_new_conversations AFTER INSERT ON conversations BEGIN
    INSERT INTO notes_tags (conversation_id, tag) VALUES (new.id, 'new;untriaged');
    UPDATE conversations SET notes = 'tagged' WHERE id = new.id;
END;
-- trailing comment; nothing after it
"""


def snapshot(path):
    """What must not change when an archive is refused: the bytes and the mtime."""
    return path.read_bytes(), path.stat().st_mtime_ns


def assert_untouched(path, before):
    assert snapshot(path) == before
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0


def ledger(path):
    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT version, name, checksum, applied_at FROM schema_migrations ORDER BY version"
        ).fetchall()


def one_line(exc_info) -> str:
    text = str(exc_info.value)
    assert text and "\n" not in text
    return text


def test_available_lists_the_numbered_files_in_order(migrations_package, initial_sql):
    package = migrations_package({
        "0002_second.sql": "CREATE TABLE b (x);",
        "0001_first.sql": "CREATE TABLE a (x);",
        "0010_tenth.sql": "CREATE TABLE c (x);",
        "README.md": "not a migration",
        "2_bad_name.sql": "CREATE TABLE d (x);",
        "0003_Upper.sql": "CREATE TABLE e (x);",
    })
    found = available(package)
    assert [(m.version, m.name) for m in found] == [(1, "first"), (2, "second"), (10, "tenth")]
    assert found[0].sql == "CREATE TABLE a (x);"
    real = available()
    assert [(m.version, m.name) for m in real][0] == (1, "initial")
    assert real[0].sql == initial_sql


def test_fresh_database_gets_every_migration(db_path):
    conn = connect(db_path)
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert TABLES <= names
        trigger = conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'messages_fts_delete'"
        ).fetchone()
        assert trigger is not None and "DELETE FROM messages_fts" in trigger[0]
        assert pending(conn, available()) == []
    finally:
        conn.close()
    rows = ledger(db_path)
    code = available()
    assert [(v, n, c) for v, n, c, _ in rows] == [(m.version, m.name, m.checksum) for m in code]
    assert all(applied_at.endswith("Z") for *_, applied_at in rows)


def test_reopening_applies_nothing_again(db_path):
    connect(db_path).close()
    before = ledger(db_path)
    connect(db_path).close()
    assert ledger(db_path) == before


def files_of(migrations) -> dict:
    return {f"{m.version:04d}_{m.name}.sql": m.sql for m in migrations}


def test_upgrade_applies_only_the_new_migration_and_keeps_the_data(
        db_path, migrations_package, assert_sound):
    shipped = available()
    package = migrations_package(files_of(shipped))
    with Archive(connect(db_path, available(package)), db_path) as archive:
        conv = archive.create_conversation("old", system_prompt="be brief")
        question = archive.add_message(conv.id, "user", "hello")
    first = ledger(db_path)
    assert [r[0] for r in first] == [m.version for m in shipped]

    migrations_package({"0999_notes.sql": NOTES_0002}, name=package)
    code = available(package)
    assert [m.version for m in code] == [m.version for m in shipped] + [999]
    with sqlite3.connect(db_path) as raw:
        assert [m.version for m in pending(raw, code)] == [999]
    raw.close()

    with Archive(connect(db_path, code), db_path) as archive:
        rows = ledger(db_path)
        assert rows[:-1] == first  # the shipped ones untouched, not re-run
        assert [(v, n, c) for v, n, c, _ in rows] == [(m.version, m.name, m.checksum) for m in code]
        assert [m.content for m in archive.messages(conv.id)] == ["be brief", "hello"]
        assert archive.conn.execute(
            "SELECT notes FROM conversations WHERE id = ?", (conv.id,)).fetchone()[0] == ""
        # Every statement ran, the trigger with its ';' inside whole.
        new = archive.create_conversation("new")
        assert [tuple(r) for r in archive.conn.execute(
            "SELECT tag FROM notes_tags WHERE conversation_id = ?", (new.id,))] == [("new;untriaged",)]
        assert archive.conn.execute(
            "SELECT notes FROM conversations WHERE id = ?", (new.id,)).fetchone()[0] == "tagged"
        assert archive.conn.execute(
            "SELECT 1 FROM sqlite_master WHERE name = 'tags_by_tag'").fetchone()
        archive.add_message(conv.id, "assistant", "hi", parent_id=question.id)
        assert_sound(archive.conn)
    connect(db_path, code).close()
    assert ledger(db_path) == rows


# Rows as chatdb wrote them before 0003: the system prompt in a column too.
BEFORE_0003 = """
INSERT INTO conversations (id, uid, title, head_id, system_prompt, created_at, updated_at)
VALUES (1, 'c1', 'chat', NULL, 'Be brief.', '2024-01-01', '2024-01-01'),
       (2, 'c2', 'fork', NULL, 'Be brief.', '2024-01-02', '2024-01-02'),
       (3, 'c3', 'imported', NULL, 'only in the column', '2024-01-03', '2024-01-03'),
       (4, 'c4', 'empty', NULL, NULL, '2024-01-04', '2024-01-04');
INSERT INTO messages (id, uid, parent_id, conversation_id, depth, role, content, created_at)
VALUES (1, 'm1', NULL, 1, 0, 'system', 'Be brief.', '2024-01-01'),
       (2, 'm2', 1, 1, 1, 'user', 'hi', '2024-01-01'),
       (3, 'm3', 2, 1, 2, 'assistant', 'hello', '2024-01-01'),
       (4, 'm4', 3, 2, 3, 'user', 'and then?', '2024-01-02'),
       (5, 'm5', NULL, 3, 0, 'user', 'a question', '2024-01-03'),
       (6, 'm6', 5, 3, 1, 'assistant', 'an answer', '2024-01-03');
UPDATE conversations SET head_id = 3 WHERE id = 1;
UPDATE conversations SET head_id = 4 WHERE id = 2;
UPDATE conversations SET head_id = 6 WHERE id = 3;
"""


def test_0003_makes_the_root_system_message_the_only_system_prompt(
        db_path, migrations_package, assert_sound):
    older = migrations_package(files_of(m for m in available() if m.version < 3))
    conn = connect(db_path, available(older))
    conn.executescript(BEFORE_0003)
    conn.close()

    with Archive.open(db_path) as archive:
        columns = {r[1] for r in archive.conn.execute("PRAGMA table_info(conversations)")}
        assert "system_prompt" not in columns
        assert dict(archive.conn.execute("SELECT id, root_id FROM messages").fetchall()) == {
            1: 1, 2: 1, 3: 1, 4: 1, 5: 5, 6: 5}
        prompts = {c: archive.conversation(c).system_prompt for c in (1, 2, 3, 4)}
        # The column's copy that no message held was never what the model read.
        assert prompts == {1: "Be brief.", 2: "Be brief.", 3: None, 4: None}
        counts = {row.id: row.message_count for row in archive.list_conversations()}
        assert counts == {1: 2, 2: 3, 3: 2, 4: 0}
        # New messages find their root too.
        reply = archive.add_message(2, "assistant", "more")
        assert archive.conn.execute("SELECT root_id FROM messages WHERE id = ?",
                                    (reply.id,)).fetchone()[0] == 1
        assert_sound(archive.conn)


def test_a_failing_migration_leaves_nothing_behind(db_path, migrations_package, initial_sql):
    package = migrations_package({"0001_initial.sql": initial_sql})
    connect(db_path, available(package)).close()
    migrations_package({"0002_broken.sql": "CREATE TABLE half (x);\nINSERT INTO nowhere VALUES (1);\n"},
                       name=package)
    with pytest.raises(SchemaError) as exc_info:
        connect(db_path, available(package))
    text = one_line(exc_info)
    assert "0002_broken" in text and "nowhere" in text
    assert [r[0] for r in ledger(db_path)] == [1]
    with sqlite3.connect(db_path) as raw:
        assert raw.execute("SELECT 1 FROM sqlite_master WHERE name = 'half'").fetchone() is None
    raw.close()
    # Fixed, it applies.
    (db_path.parent / "packages" / package / "0002_broken.sql").write_text("CREATE TABLE half (x);")
    connect(db_path, available(package)).close()
    assert [r[0] for r in ledger(db_path)] == [1, 2]


@pytest.mark.parametrize("journal_mode", ["wal", "delete"])
def test_newer_database_is_refused_and_not_written(db_path, journal_mode):
    with Archive.open(db_path) as archive:
        conv = archive.create_conversation("from the future")
        archive.add_message(conv.id, "user", "hello")
    raw = sqlite3.connect(db_path, isolation_level=None)
    raw.execute(f"PRAGMA journal_mode = {journal_mode}")
    raw.execute("INSERT INTO schema_migrations VALUES (9999, 'from_the_future', 'x', 'now')")
    raw.close()
    assert not db_path.with_name(db_path.name + "-wal").exists()
    before = snapshot(db_path)

    for opener in (connect, Archive.open):
        with pytest.raises(SchemaError) as exc_info:
            opener(db_path)
        text = one_line(exc_info)
        assert "newer" in text and "9999_from_the_future" in text
        assert_untouched(db_path, before)
    # Still in the journal mode it had: the WAL switch comes after the check.
    assert before[0][18:20] == (b"\x02\x02" if journal_mode == "wal" else b"\x01\x01")


def test_newer_database_with_a_pending_wal_is_not_checkpointed(db_path):
    """The newer chatdb crashed, leaving its last commit in the WAL: refusing
    must not fold that WAL into the file (closing a connection that may write
    would)."""
    Archive.open(db_path).close()
    subprocess.run([sys.executable, "-c", (
        "import os, sqlite3, sys\n"
        "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "conn.execute('PRAGMA wal_autocheckpoint = 0')\n"
        "conn.execute(\"INSERT INTO schema_migrations VALUES (9999, 'future', 'x', 'now')\")\n"
        "os._exit(0)  # no close, no checkpoint: a crash\n"), str(db_path)], check=True)
    wal = db_path.with_name(db_path.name + "-wal")
    before, wal_before = snapshot(db_path), wal.read_bytes()
    assert wal_before
    with pytest.raises(SchemaError) as exc_info:
        connect(db_path)
    assert "9999_future" in one_line(exc_info)
    assert snapshot(db_path) == before and wal.read_bytes() == wal_before


def test_changed_migration_is_reported_not_rerun(db_path, migrations_package, initial_sql):
    package = migrations_package({"0001_initial.sql": initial_sql})
    connect(db_path, available(package)).close()
    recorded = ledger(db_path)
    before = snapshot(db_path)

    migrations_package({"0001_initial.sql": initial_sql + "\n-- an edit\n"}, name=package)
    with pytest.raises(SchemaError) as exc_info:
        connect(db_path, available(package))
    text = one_line(exc_info)
    assert "0001_initial" in text and "changed" in text
    assert_untouched(db_path, before)
    assert ledger(db_path) == recorded

    # The same with a list of migrations passed directly.
    edited = [Migration(1, "initial", initial_sql + " ")]
    with pytest.raises(SchemaError, match="changed"):
        connect(db_path, edited)
    assert_untouched(db_path, before)


def test_corrupt_file_is_refused_in_one_line(db_path):
    import random
    db_path.write_bytes(random.Random(7).randbytes(16384))
    before = snapshot(db_path)
    with pytest.raises(SchemaError) as exc_info:
        Archive.open(db_path)
    assert str(db_path) in one_line(exc_info)
    assert_untouched(db_path, before)


def test_text_file_is_refused(db_path):
    db_path.write_text("these are my notes, not a database\n" * 40)
    before = snapshot(db_path)
    with pytest.raises(SchemaError) as exc_info:
        connect(db_path)
    one_line(exc_info)
    assert_untouched(db_path, before)


def test_foreign_sqlite_file_is_refused_and_not_written(db_path):
    with sqlite3.connect(db_path) as raw:
        raw.execute("CREATE TABLE people (name TEXT)")
        raw.execute("INSERT INTO people VALUES ('ada')")
    raw.close()
    before = snapshot(db_path)
    with pytest.raises(SchemaError) as exc_info:
        Archive.open(db_path)
    assert "not a chatdb archive" in one_line(exc_info)
    assert_untouched(db_path, before)
    assert before[0][18:20] == b"\x01\x01"  # not switched to WAL


def test_an_empty_file_is_refused_and_left_as_it_is(db_path):
    """A new archive is made whole and then linked into place, so an empty
    file is never chatdb's: it may be anything the user meant to fill."""
    db_path.touch()
    with pytest.raises(SchemaError, match="an empty file, not a chatdb archive"):
        Archive.open(db_path)
    assert db_path.stat().st_size == 0
    db_path.unlink()
    with Archive.open(db_path) as archive:
        assert archive.count_conversations() == 0
    assert [r[0] for r in ledger(db_path)] == [m.version for m in available()]


def test_pending_reads_one_snapshot(db_path):
    """pending() holds one read snapshot: a migration committed by another
    connection between its reads cannot make a new archive look foreign."""
    db_path.touch()
    reader = sqlite3.connect(db_path, isolation_level=None)
    writer = sqlite3.connect(db_path, isolation_level=None)
    original = reader.execute

    class Spy:
        """A connection whose first query lets the writer apply 0001 right after it."""

        in_transaction = property(lambda self: reader.in_transaction)

        def execute(self, sql, *args):
            result = original(sql, *args)
            if sql == LEDGER_EXISTS:  # seen missing: now another process creates it
                writer.execute("PRAGMA journal_mode = WAL")
                apply(writer, available()[0])
            return result

    try:
        reader.execute("PRAGMA journal_mode = WAL")
        versions = [m.version for m in available()]
        assert [m.version for m in pending(Spy(), available())] == versions
        assert not reader.in_transaction
        assert [m.version for m in pending(reader, available())] == versions[1:]
    finally:
        reader.close()
        writer.close()


def test_statements_splits_like_sqlite():
    sql = ("CREATE TABLE a (x); CREATE TABLE b (y);  -- two on a line; a comment\n"
           "INSERT INTO a VALUES ('semi;colon');\n"
           "/* block; comment */ CREATE TRIGGER t AFTER INSERT ON a BEGIN\n"
           "  INSERT INTO b VALUES (new.x); DELETE FROM b WHERE y = ';';\nEND;\n-- end\n")
    parts = list(statements(sql))
    assert len(parts) == 4
    conn = sqlite3.connect(":memory:")
    for part in parts:
        conn.execute(part)
    assert conn.execute("SELECT x FROM a").fetchall() == [("semi;colon",)]
    conn.execute("INSERT INTO a VALUES ('z')")
    assert conn.execute("SELECT y FROM b").fetchall() == [("z",)]
    with pytest.raises(SchemaError, match="incomplete"):
        list(statements("CREATE TABLE a (x);\nCREATE TABLE b (y"))


def test_0009_keeps_kv_stored_before_it_readable(db_path, migrations_package, assert_sound):
    older = migrations_package(files_of(m for m in available() if m.version < 9))
    raw = bytes(range(256)) * 8
    with Archive(connect(db_path, available(older)), db_path) as archive, archive.transaction():
        # Rows as that schema has them (the archive's code writes today's columns).
        archive.conn.execute("INSERT INTO conversations (id, uid, title, created_at, updated_at) "
                             "VALUES (1, 'c1', 'old', 't', 't')")
        archive.conn.execute("INSERT INTO messages (id, uid, parent_id, root_id, conversation_id, "
                             "depth, role, content, created_at) "
                             "VALUES (1, 'm1', NULL, 1, 1, 0, 'user', 'hello', 't')")
        question = archive.message(1)
        encoded = encode(raw)
        archive.conn.execute(   # as the code before 0009 wrote a segment
            "INSERT INTO kv_segments (message_id, fingerprint, kind, n_tokens, codec, raw_size, "
            "checksum, created_at, data) VALUES (?, 'fp', 'rows', 4, ?, ?, ?, '', ?)",
            (question.id, encoded.codec, encoded.raw_size, encoded.checksum, encoded.blob))

    with Archive.open(db_path) as archive:
        assert archive.kv.rows_index(question.id, "fp") == [SegmentRef(question.id, 4, len(raw))]
        assert bytes(archive.kv.get(question.id, "fp").decode()) == raw
        assert archive.kv.usage("fp").raw_bytes == len(raw)
        # Deleting it (no shared run named) leaves the archive sound.
        archive.delete_conversation(1)
        assert archive.kv.usage().segments == 0
        assert_sound(archive.conn)
