"""The views made for people (migration 0014): chats, chat_messages, chat_search; always current,
and never a BLOB (no token array, no KV byte)."""

import pytest

VIEWS = ("chats", "chat_messages", "chat_search")


@pytest.fixture
def chats(archive):
    conv = archive.create_conversation("Rust", system_prompt="Be brief.", model="smol")
    question = archive.add_message(conv.id, "user", "What is a lifetime?")
    first = archive.add_message(conv.id, "assistant", "A scope.", meta={"model": "m1"})
    second = archive.add_message(conv.id, "assistant", "A region of code.", parent_id=question.id)
    archive.add_message(conv.id, "user", "And borrowing?")
    archive.tags.add(conv.id, ["rust", "Learning"])
    archive.tokens.put(question.id, "tok", [1, 2, 3, 4])
    archive.kv.put(question.id, "fp", "rows", 4, b"\x07" * 4096)   # KV bytes, never in a view
    fork = archive.fork(first.id, title="Forked")
    return conv.id, fork.id, question, first, second


def test_chats_a_conversation_a_row(archive, chats):
    conv, fork, *_ = chats
    rows = {r["id"]: dict(r) for r in archive.conn.execute("SELECT * FROM chats")}
    assert rows[conv]["title"] == "Rust" and rows[conv]["tags"] == '["Learning","rust"]'
    assert rows[conv]["messages"] == 3 and rows[conv]["first_message"] == "What is a lifetime?"
    assert rows[fork]["messages"] == 2 and rows[fork]["first_message"] == "What is a lifetime?"
    archive.tags.set_flag(conv, "pinned", True)
    archive.rename(fork, "Renamed")                      # a view is always current
    rows = {r["id"]: dict(r) for r in archive.conn.execute("SELECT * FROM chats")}
    assert rows[conv]["pinned"] == 1 and rows[fork]["title"] == "Renamed"
    assert set(rows[conv]) == {"id", "title", "tags", "pinned", "archived", "created", "updated",
                               "messages", "first_message", "model", "uid"}


def test_chat_messages_positions_branches_and_the_current_path(archive, chats):
    conv, _, question, first, second = chats
    rows = {r["id"]: dict(r) for r in archive.conn.execute(
        "SELECT * FROM chat_messages WHERE conversation = ?", (conv,))}
    assert [(r["position"], r["role"]) for r in rows.values()] == [
        (0, "system"), (1, "user"), (2, "assistant"), (2, "assistant"), (3, "user")]
    assert rows[question.id]["tokens"] == 4 and rows[question.id]["branch"] is None
    assert (rows[first.id]["branch"], rows[first.id]["current"]) == ("1 of 2", 0)
    assert (rows[second.id]["branch"], rows[second.id]["current"]) == ("2 of 2", 1)
    assert rows[first.id]["model"] == "m1" and rows[second.id]["model"] == "smol"
    archive.set_head(conv, first.id)                      # back to the first answer
    current = dict(archive.conn.execute(
        "SELECT id, current FROM chat_messages WHERE conversation = ?", (conv,)).fetchall())
    assert current[first.id] == 1 and current[second.id] == 0


def test_chat_search_with_the_full_text_index(archive, chats):
    found = archive.conn.execute(
        "SELECT id, title, text FROM chat_search WHERE id IN "
        "(SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'borrowing')").fetchall()
    assert [(r["title"], r["text"]) for r in found] == [("Rust", "And borrowing?")]


def test_no_view_holds_a_blob_or_reads_kv(archive, chats):
    for view in VIEWS:
        columns = [r[1] for r in archive.conn.execute(f"PRAGMA table_info({view})")]
        for column in columns:
            kinds = {r[0] for r in archive.conn.execute(f'SELECT DISTINCT typeof("{column}") FROM {view}')}
            assert "blob" not in kinds, (view, column)
        sql = archive.conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (view,)).fetchone()[0]
        assert "kv_" not in sql and "vector" not in sql and "tokens FROM" not in sql
