"""Export and import in the archive: exact round trips, uids, ownership, atomicity."""

import json

import pytest

from chatdb.archive import Archive
from chatdb.clock import from_unix
from chatdb.transfer.export_json import export_document
from chatdb.transfer.records import ImportFormatError
from chatdb.transfer.importer import import_bytes, read_document


def _import(archive, document, source="test.json"):
    return import_bytes(archive, json.dumps(document).encode(), source)


def _forest(archive):
    """Branches, a fork continued, a moved head, statuses, meta, an empty conversation."""
    rust = archive.create_conversation("Rust", system_prompt="Be brief.", model="smol")
    q = archive.add_message(rust.id, "user", "What is a lifetime?", meta={"lang": "en"})
    a1 = archive.add_message(rust.id, "assistant", "A scope.")
    archive.add_message(rust.id, "assistant", "A region, longer answer", parent_id=q.id,
                        status="interrupted")
    fork = archive.fork(a1.id, title="Borrowing")
    archive.add_message(fork.id, "user", "And borrowing? 借用")
    archive.add_message(fork.id, "assistant", "Shared or exclusive.")
    archive.set_head(rust.id, a1.id)  # the head need not be a leaf
    archive.create_conversation("Empty")
    return rust, fork


def _counts(archive):
    return archive.count_conversations(), archive.count_messages()


def test_round_trip_is_exact(tmp_path, assert_sound):
    with Archive.open(tmp_path / "a.db") as a, Archive.open(tmp_path / "b.db") as b:
        _forest(a)
        exported = export_document(a)
        report = _import(b, exported)
        assert (report.conversations, report.messages) == (3, 6)
        assert export_document(b) == exported
        assert_sound(b.conn)
        # The text index was filled too.
        hits = b.conn.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH '借'")
        assert hits.fetchone()[0] == 1


def test_messages_only_forks_reach_keep_no_owner(tmp_path):
    with Archive.open(tmp_path / "a.db") as a, Archive.open(tmp_path / "b.db") as b:
        rust, fork = _forest(a)
        a.delete_conversation(rust.id)
        exported = export_document(a)
        ownerless = [m for c in exported["conversations"] for m in c["messages"]
                     if m["conversation"] is None]
        assert len(ownerless) == 3  # system prompt, question, first answer
        _import(b, exported)
        assert export_document(b) == exported
        imported_fork = b.conversation_by_uid(fork.uid)
        assert b.delete_conversation(imported_fork.id) == 5


def test_fork_source_is_carried_by_uid(tmp_path):
    with Archive.open(tmp_path / "a.db") as a, Archive.open(tmp_path / "b.db") as b:
        b.create_conversation("already here")
        b.add_message(1, "user", "shifts every row id")
        _, fork = _forest(a)
        _import(b, export_document(a))
        source_in_a = a.message(fork.meta["forked_from"])
        source_in_b = b.message(b.conversation_by_uid(fork.uid).meta["forked_from"])
        assert source_in_b.uid == source_in_a.uid


def test_exporting_a_fork_alone_gives_it_its_history(tmp_path):
    with Archive.open(tmp_path / "a.db") as a, Archive.open(tmp_path / "b.db") as b:
        _, fork = _forest(a)
        _import(b, export_document(a, [fork.id]))
        assert [m.content for m in b.messages(b.conversation_by_uid(fork.uid).id)] == \
            [m.content for m in a.messages(fork.id)]
        assert b.delete_conversation(b.conversation_by_uid(fork.uid).id) == 5
        assert _counts(b) == (0, 0)


def test_second_import_adds_nothing_but_what_is_new(tmp_path):
    with Archive.open(tmp_path / "a.db") as a, Archive.open(tmp_path / "b.db") as b:
        rust, _ = _forest(a)
        _import(b, export_document(a))
        again = _import(b, export_document(a))
        assert (again.conversations, again.messages) == (0, 0)
        assert (again.duplicate_conversations, again.duplicate_messages) == (3, 6)
        newer = a.add_message(rust.id, "user", "One more thing")
        head_before = b.conversation_by_uid(rust.uid).head_id
        merged = _import(b, export_document(a))
        assert (merged.conversations, merged.messages, merged.duplicate_messages) == (0, 1, 6)
        added = b.message_by_uid(newer.uid)
        assert b.message(added.parent_id).uid == a.message(newer.parent_id).uid
        # An existing conversation's own state (head, title) is the archive's, not the file's.
        assert b.conversation_by_uid(rust.uid).head_id == head_before


def _unchanged(archive, action):
    before = export_document(archive), _counts(archive)
    with pytest.raises(ImportFormatError) as raised:
        action()
    assert (export_document(archive), _counts(archive)) == before
    return str(raised.value)


def _two_conversations(a):
    _forest(a)
    return export_document(a)


WRITER_ERRORS = {
    "head not a message": (lambda d: d["conversations"][2].update(head="nobody"),
                           'conversation 3 ("Empty"): head "nobody" is not one of its messages'),
    "dangling parent": (lambda d: d["conversations"][1]["messages"][-1].update(parent="nobody"),
                        'parent "nobody" is neither in the file nor in the archive'),
    "message twice": (lambda d: d["conversations"][1]["messages"].append(
        d["conversations"][1]["messages"][-1]), "appears twice in the conversation"),
    "cycle": (lambda d: d["conversations"][1]["messages"][0].update(
        parent=d["conversations"][1]["messages"][-1]["uid"]), "parent links form a cycle"),
}


@pytest.mark.parametrize("case", list(WRITER_ERRORS))
def test_errors_found_while_writing_roll_everything_back(tmp_path, case):
    breakage, expected = WRITER_ERRORS[case]
    with Archive.open(tmp_path / "a.db") as a, Archive.open(tmp_path / "b.db") as b:
        document = _two_conversations(a)
        breakage(document)
        message = _unchanged(b, lambda: _import(b, document, "x.json"))
        assert message.startswith("x.json: ")
        assert expected in message


READER_ERRORS = {
    "bad role": (lambda d: d["conversations"][0]["messages"][1].update(role="robot"),
                 '"role" is \'robot\', expected one of system, user, assistant, tool'),
    "bad status": (lambda d: d["conversations"][0]["messages"][1].update(status="done"),
                   '"status" is \'done\''),
    "content not text": (lambda d: d["conversations"][0]["messages"][1].update(content=[1]),
                         '"content" is a list, expected a string'),
    "bad time": (lambda d: d["conversations"][0].update(created_at="last week"),
                 'conversation 1 ("Rust"): "created_at" is not an ISO 8601 time'),
    "no uid": (lambda d: d["conversations"][0]["messages"][0].pop("uid"),
               'conversation 1 ("Rust"): message 1: missing "uid"'),
    "conversations not a list": (lambda d: d.update(conversations={}),
                                 '"conversations" is an object, expected a list'),
    "newer version": (lambda d: d.update(version=2), "chatdb export version 2"),
}


@pytest.mark.parametrize("case", list(READER_ERRORS))
def test_malformed_chatdb_export(tmp_path, case):
    breakage, expected = READER_ERRORS[case]
    with Archive.open(tmp_path / "a.db") as a:
        document = _two_conversations(a)
        breakage(document)
        assert expected in _unchanged(a, lambda: _import(a, document))


# -- ChatGPT reader edge cases ----------------------------------------------


def _node(key, parent, role=None, text="x", t=None, **message):
    body = None
    if role:
        body = {"author": {"role": role}, "content": {"content_type": "text", "parts": [text]},
                "create_time": t, **message}
    return key, {"id": key, "message": body, "parent": parent, "children": []}


def _chatgpt(*nodes, **conversation):
    return {"title": "t", "create_time": 1000.0, "update_time": 2000.0, "id": "c",
            "mapping": dict(nodes), **conversation}


def _read(conversation):
    fmt, records = read_document(json.dumps(conversation).encode())
    assert fmt == "chatgpt"
    return records[0]


def test_chatgpt_head_on_a_skipped_node_is_its_nearest_kept_ancestor():
    record = _read(_chatgpt(_node("r", None), _node("u", "r", "user", t=1001.0),
                            _node("tool", "u", "tool", t=1002.0), current_node="tool"))
    assert record.head_uid == "chatgpt:c:u"
    assert record.skipped == 1


def test_chatgpt_without_current_node_ends_at_the_newest_message():
    record = _read(_chatgpt(_node("u", None, "user", t=1001.0), _node("a", "u", "assistant", t=1003.0),
                            _node("b", "u", "assistant", t=1002.0)))
    assert record.head_uid == "chatgpt:c:a"


def test_chatgpt_missing_times_are_inherited():
    record = _read(_chatgpt(_node("u", None, "user", t=1001.0), _node("a", "u", "assistant"),
                            create_time=None, update_time=None))
    assert [m.created_at for m in record.messages] == [from_unix(1001.0)] * 2
    assert record.created_at == record.updated_at == from_unix(1001.0)


def test_chatgpt_conversation_with_no_text_is_kept_empty(tmp_path):
    with Archive.open(tmp_path / "a.db") as a:
        report = _import(a, [_chatgpt(_node("r", None), current_node="r")])
        assert (report.conversations, report.messages) == (1, 0)
        assert a.conversation_by_uid("chatgpt:c").head_id is None


def test_chatgpt_single_conversation_object_and_empty_list(tmp_path):
    with Archive.open(tmp_path / "a.db") as a:
        assert _import(a, []).conversations == 0
        assert _import(a, _chatgpt(_node("u", None, "user", t=1001.0))).messages == 1


def test_chatgpt_missing_id():
    conversation = _chatgpt(_node("u", None, "user"))
    del conversation["id"]
    with pytest.raises(ImportFormatError, match='conversation 1 \\("t"\\): missing "id"'):
        _read(conversation)


def test_chatgpt_self_parent_is_a_cycle():
    with pytest.raises(ImportFormatError, match='node "u": its parent links form a cycle'):
        _read(_chatgpt(_node("u", "u", "user")))


def test_chatgpt_current_node_outside_mapping():
    with pytest.raises(ImportFormatError, match='"current_node" "zz" is not in "mapping"'):
        _read(_chatgpt(_node("u", None, "user"), current_node="zz"))


def test_the_system_prompt_is_the_root_message_on_import_and_export(tmp_path):
    """One truth: the root system message. A file's "system_prompt" that disagrees
    with it is not what the model would read, so import takes the message."""
    with Archive.open(tmp_path / "a.db") as a, Archive.open(tmp_path / "b.db") as b:
        rust, fork = _forest(a)
        exported = export_document(a)
        by_uid = {c["uid"]: c for c in exported["conversations"]}
        assert by_uid[rust.uid]["system_prompt"] == "Be brief."
        assert by_uid[fork.uid]["system_prompt"] == "Be brief."  # its path's root
        by_uid[rust.uid]["system_prompt"] = "Something else"
        _import(b, exported)
        imported = b.conversation_by_uid(rust.uid)
        assert imported.system_prompt == b.messages(imported.id)[0].content == "Be brief."
        again = {c["uid"]: c for c in export_document(b)["conversations"]}
        assert again[rust.uid]["system_prompt"] == "Be brief."


def test_a_chatgpt_system_message_at_the_root_is_the_system_prompt(tmp_path):
    conversation = _chatgpt(_node("s", None, "system", "Answer in French.", t=1000.5),
                            _node("u", "s", "user", "Hello", t=1001.0))
    with Archive.open(tmp_path / "a.db") as archive:
        _import(archive, [conversation])
        conv = archive.conversation_by_uid("chatgpt:c")
        assert conv.system_prompt == "Answer in French."
        assert archive.list_conversations()[0].message_count == 1
