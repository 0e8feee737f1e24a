"""Import, export, import: the identity, on generated chatdb exports and ChatGPT files.

The files are generated with Unicode text (any plane, empty strings), empty
and non-text parts, branches (edited questions, regenerated answers), hidden
system nodes and tool calls with their output, which the ChatGPT reader leaves
out. What an import keeps, an export gives back exactly, and a second import
of either file adds nothing.
"""

import json
import tempfile
from pathlib import Path

from hypothesis import given, strategies as st

from chatdb.archive import Archive
from chatdb.transfer.export_json import export_document
from chatdb.transfer.importer import import_bytes

from .test_tree import TEXT, same_document, tree_faults

ROLES = ("system", "user", "assistant", "tool")
PART = st.one_of(TEXT, st.just(""), st.fixed_dictionaries({"content_type": st.just("image_asset_pointer")}))


@st.composite
def chatgpt_conversation(draw, number: int):
    """One conversation of conversations.json: a tree of nodes under the empty root."""
    mapping = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
    ids = ["root"]
    for i in range(draw(st.integers(0, 8))):
        parent = draw(st.sampled_from(ids))          # branches: any node may get a sibling
        kind = draw(st.sampled_from(["user", "assistant", "system", "hidden", "call", "output"]))
        message = {"author": {"role": {"call": "assistant", "output": "tool", "hidden": "system"}.get(kind, kind)},
                   "content": {"content_type": "text", "parts": draw(st.lists(PART, max_size=3))},
                   "create_time": 1_700_000_000 + i * 60 + draw(st.integers(0, 59)),
                   "status": draw(st.sampled_from(["finished_successfully", "in_progress"]))}
        if kind == "hidden":
            message["metadata"] = {"is_visually_hidden_from_conversation": True}
        if kind == "call":
            message["recipient"] = "browser"
        node = f"n{i}"
        mapping[node] = {"id": node, "message": message, "parent": parent, "children": []}
        mapping[parent]["children"].append(node)
        ids.append(node)
    return {"id": f"c{number}", "title": draw(TEXT), "create_time": 1_700_000_000,
            "update_time": 1_700_090_000, "mapping": mapping,
            "current_node": draw(st.sampled_from(ids))}


@st.composite
def chatgpt_file(draw):
    return [draw(chatgpt_conversation(n)) for n in range(draw(st.integers(1, 3)))]


@st.composite
def chatdb_file(draw):
    """A chatdb export: conversations whose messages form trees, forks sharing history."""
    conversations, every = [], []
    for n in range(draw(st.integers(1, 3))):
        uid, messages = f"conv-{n}", []
        for i in range(draw(st.integers(0, 6))):
            parent = draw(st.sampled_from([None] + [m["uid"] for m in messages]))
            messages.append({"uid": f"{uid}-m{i}", "parent": parent, "conversation": uid,
                             "role": draw(st.sampled_from(ROLES)), "content": draw(TEXT),
                             "status": draw(st.sampled_from(["complete", "interrupted"])),
                             "created_at": f"2024-05-01T10:{i:02d}:00.000Z",
                             "meta": draw(st.dictionaries(st.sampled_from(["model", "note"]), TEXT, max_size=1))})
        if every and draw(st.booleans()):   # a fork: it lists the history it shares
            chain, point = [], draw(st.sampled_from(every))
            while point is not None:
                chain.insert(0, point)
                point = next((m for m in every if m["uid"] == point["parent"]), None)
            for m in messages:   # its own messages continue the history it shares
                m["parent"] = m["parent"] or chain[-1]["uid"]
            messages = chain + messages
        every += [m for m in messages if m["conversation"] == uid]
        conversations.append({
            "uid": uid, "title": draw(TEXT), "created_at": f"2024-05-0{n + 1}T09:00:00.000Z",
            "updated_at": f"2024-05-0{n + 1}T11:00:00.000Z", "model": draw(st.one_of(st.none(), TEXT)),
            "meta": {}, "owner": draw(st.sampled_from([None, "ann"])),
            "tags": draw(st.sampled_from([[], ["work"], ["Japan trip", "wörk"]])),
            "pinned": draw(st.booleans()), "archived": draw(st.booleans()),
            "head": draw(st.sampled_from([None] + [m["uid"] for m in messages])),
            "messages": messages})
    return {"format": "chatdb-export", "version": 1, "conversations": conversations}


def as_given(document: dict, exported: dict) -> None:
    """A chatdb file's conversations come back as the file has them: every field, and each
    message listed (a fork's shared history is listed where it reaches it)."""
    back = {c["uid"]: c for c in exported["conversations"]}
    for conv in document["conversations"]:
        out = back[conv["uid"]]
        assert {k: v for k, v in out.items() if k not in ("messages", "system_prompt")} == {
            k: v for k, v in conv.items() if k != "messages"}
        given_messages = {m["uid"]: m for m in conv["messages"]}
        assert all(given_messages[m["uid"]] == m for m in out["messages"])
        own = {m["uid"] for m in conv["messages"] if m["conversation"] == conv["uid"]}
        assert own <= {m["uid"] for m in out["messages"]}


def round_trip(data: bytes) -> dict:
    with tempfile.TemporaryDirectory() as where:
        with Archive.open(Path(where) / "a.db") as first:
            import_bytes(first, data, "file.json")
            assert tree_faults(first.conn) == []
            exported = export_document(first)
            again = json.dumps(exported, ensure_ascii=False).encode()
            with Archive.open(Path(where) / "b.db") as second:
                import_bytes(second, again, "export.json")
                assert same_document(export_document(second), exported)
            messages = first.count_messages()
            import_bytes(first, data, "file.json")       # the same file again: nothing new
            import_bytes(first, again, "export.json")
            assert first.count_messages() == messages
            assert same_document(export_document(first), exported)
            return exported


@given(chatgpt_file())
def test_chatgpt_files_import_export_import_as_the_identity(document):
    round_trip(json.dumps(document, ensure_ascii=False).encode())


@given(chatdb_file())
def test_chatdb_exports_import_export_import_as_the_identity(document):
    as_given(document, round_trip(json.dumps(document, ensure_ascii=False).encode()))
