"""`chatdb sql`: read-only SQL on the archive, as a table, --json, --csv and --nl; what would
write, or read beyond the archive, is refused in one line (exit 2) and nothing changes."""

import csv
import io
import json

import pytest


def test_the_views_as_json_csv_nl_and_a_table(chatdb, sample):
    chatdb("tag", sample.rust, "rust")
    rows = chatdb("sql", "SELECT id, title, tags, messages FROM chats ORDER BY id", "--json").json()
    assert rows[0] == {"id": sample.rust, "title": "Rust questions", "tags": '["rust"]', "messages": 2}
    nl = chatdb("sql", "--nl", "SELECT id, role FROM chat_messages WHERE conversation = :c",
                "-p", "c", str(sample.trip))
    assert [json.loads(line) for line in nl.stdout.splitlines()] == [
        {"id": m, "role": r} for m, r in zip((5, 6), ("user", "assistant"))]
    table = chatdb("sql", "--csv", "SELECT title, text FROM chat_search WHERE id IN "
                   "(SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'Kyoto')")
    assert list(csv.reader(io.StringIO(table.stdout))) == [["title", "text"],
                                                            ["Trip to Kyoto", "Plan three days in Kyoto"]]
    shown = chatdb("sql", "SELECT id, title FROM chats ORDER BY id")
    assert shown.returncode == 0 and shown.stdout.splitlines()[0].split() == ["id", "title"]
    assert "Trip to Kyoto" in shown.stdout
    assert chatdb("sql", "SELECT 1 WHERE 0", "--json").json() == []


def test_a_blob_is_its_size_in_the_table_and_base64_in_json(chatdb, archive):
    assert "<BLOB 3 bytes>" in chatdb("sql", "SELECT x'010203' AS b").stdout
    assert chatdb("sql", "SELECT x'010203' AS b", "--json").json() == [
        {"b": {"$base64": True, "encoded": "AQID"}}]


@pytest.mark.parametrize("statement, said", [
    ("DELETE FROM messages", "refused: a write"),
    ("UPDATE conversations SET title = 'x'", "refused: a write"),
    ("DROP VIEW chats", "refused: a schema change"),
    ("CREATE TEMP TABLE t (x)", "refused: a schema change"),
    ("ATTACH DATABASE 'other.db' AS other", "refused: ATTACH"),
    ("VACUUM INTO 'copy.db'", "refused: ATTACH"),
    ("VACUUM", "refused: VACUUM"),
    ("PRAGMA writable_schema = ON", "refused: PRAGMA writable_schema"),
    ("PRAGMA query_only = OFF", "refused: PRAGMA query_only"),
    ("PRAGMA journal_mode = DELETE", "refused: PRAGMA journal_mode"),
    ("SELECT load_extension('/tmp/x')", "refused: load_extension()"),
    ("DELETE FROM messages_fts_data", "refused: a write"),
    ("SELEC 1", "bad query: near \"SELEC\""),
    ("SELECT 1; SELECT 2", "bad query: You can only execute one statement"),
    ("SELECT * FROM no_such_table", "bad query: no such table"),
])
def test_what_is_not_a_read_is_refused_in_one_line(chatdb, sample, statement, said):
    before = chatdb("export").stdout
    assert said in chatdb("sql", statement).error(2)
    assert chatdb("export").stdout == before
    assert not (chatdb.cwd / "copy.db").exists() and not (chatdb.cwd / "other.db").exists()


def test_reading_pragmas_are_allowed(chatdb, sample):
    columns = chatdb("sql", "PRAGMA table_info(chats)", "--json").json()
    assert "first_message" in [c["name"] for c in columns]
    assert chatdb("sql", "SELECT * FROM pragma_table_info('chat_messages')", "--json").json()
    assert chatdb("sql", "PRAGMA user_version", "--json").json() == [{"user_version": 0}]


def test_one_of_the_output_shapes(chatdb, sample):
    assert chatdb("sql", "SELECT 1", "--json", "--csv").error(2)
