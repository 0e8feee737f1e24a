"""Placing a client's message list: the longest stored path is reused, the rest added."""

import sqlite3

from chatdb.archive import Archive
from chatdb.message_match import LONGEST_MATCH, longest_match, place
from chatdb.storage.connection import connect
from chatdb.storage.migrate import available

CHAT = [("system", "Be brief."), ("user", "What is tea?"), ("assistant", "A drink."),
        ("user", "And coffee?")]


def test_a_new_list_starts_a_conversation_and_a_resend_adds_nothing_but_the_new(archive):
    first = place(archive, CHAT[:2], "tea", {"client": "test"})
    assert first.created and first.reused == 0 and len(first.path) == 2
    conv = archive.conversation(first.conversation_id)
    assert conv.system_prompt == "Be brief." and conv.meta == {"client": "test"}
    archive.add_message(conv.id, "assistant", "A drink.", parent_id=first.path[-1].id)
    count = archive.count_messages()
    again = place(archive, CHAT, "tea", {})
    assert not again.created and again.conversation_id == conv.id and again.reused == 3
    assert archive.count_messages() == count + 1
    assert archive.conversation(conv.id).head_id == again.path[-1].id


def test_a_difference_at_message_k_branches_there(archive):
    placed = place(archive, CHAT, "tea", {})
    other = place(archive, CHAT[:3] + [("user", "And cocoa?")], "tea", {})
    assert other.conversation_id == placed.conversation_id and other.reused == 3
    assert other.path[-1].parent_id == placed.path[2].id
    assert children(archive, placed.path[2].id) == ["And coffee?", "And cocoa?"]
    assert archive.conversation(placed.conversation_id).head_id == other.path[-1].id


def test_a_shared_system_prompt_alone_starts_another_conversation(archive):
    placed = place(archive, CHAT[:2], "tea", {})
    other = place(archive, [CHAT[0], ("user", "What is milk?")], "milk", {})
    assert other.created and other.conversation_id != placed.conversation_id
    assert other.reused == 1 and other.path[0].id == placed.path[0].id   # the root is shared
    assert archive.messages(placed.conversation_id)[-1].content == "What is tea?"


def test_the_deepest_match_wins_and_roles_count(archive):
    place(archive, CHAT, "tea", {})
    assert [m.content for m in longest_match(archive, CHAT + [("assistant", "x")])] == [c for _, c in CHAT]
    assert longest_match(archive, [("user", "Be brief.")]) == []    # same text, other role
    assert longest_match(archive, [("user", "What is tea?")]) == []  # not a root


def test_the_match_is_one_indexed_query(archive):
    place(archive, CHAT, "tea", {})
    plan = " ".join(row[3] for row in archive.conn.execute("EXPLAIN QUERY PLAN " + LONGEST_MATCH,
                                                           {"hashes": "[1, 2]", "owner": "ann", "share": 0}))
    assert "messages_by_content_hash" in plan and "SCAN m" not in plan


def test_messages_written_before_the_migration_get_their_hash(db_path):
    before = [m for m in available() if m.version < 6]
    with Archive(connect(db_path, before), db_path) as old, old.transaction():
        # Rows as that schema has them (the archive's code writes today's columns).
        old.conn.execute("INSERT INTO conversations (id, uid, title, head_id, created_at, "
                         "updated_at) VALUES (1, 'c1', 'old', NULL, 't', 't')")
        for id_, parent, role, text in ((1, None, "system", "Be brief."),
                                        (2, 1, "user", "What is tea?")):
            old.conn.execute("INSERT INTO messages (id, uid, parent_id, root_id, conversation_id, "
                             "depth, role, content, created_at) VALUES (?, ?, ?, 1, 1, ?, ?, ?, 't')",
                             (id_, f"m{id_}", parent, id_ - 1, role, text))
    with Archive.open(db_path) as archive:
        assert [m.id for m in longest_match(archive, CHAT[:2])] == [1, 2]


def test_changing_a_message_text_rehashes_it(archive):
    placed = place(archive, CHAT[:2], "tea", {})
    answer = archive.add_message(placed.conversation_id, "assistant", "")
    with archive.transaction():
        archive.conn.execute("UPDATE messages SET content = 'A drink.' WHERE id = ?", (answer.id,))
    assert [m.id for m in longest_match(archive, CHAT)][-1] == answer.id


def test_a_plain_sqlite_reader_needs_no_chatdb_function(archive, db_path):
    place(archive, CHAT, "tea", {})
    with sqlite3.connect(db_path) as raw:
        assert raw.execute("SELECT count(*) FROM messages WHERE content_hash IS NOT NULL").fetchone() == (4,)


def children(archive, message_id: int) -> list[str]:
    rows = archive.conn.execute("SELECT content FROM messages WHERE parent_id = ? ORDER BY id",
                                (message_id,))
    return [r[0] for r in rows]
