"""Random sequences of what the console and the importer do keep the tree's invariants.

New chats, replies, forks, edits, retries, deletions, exports and imports on a
real archive file, against a model of each conversation's current path: after
every step there is one root per tree, no cycle, every path is as stored and
as the model says, and the database is sound.
"""

import json
import shutil
import tempfile
from pathlib import Path

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, precondition, rule

from chatdb.archive import Archive
from chatdb.content_hash import content_hash
from chatdb.transfer.export_json import export_document
from chatdb.transfer.importer import import_bytes

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=24)   # any Unicode, empty too


def tree_faults(conn) -> list[str]:
    """What breaks the forest's invariants, as lines (none: sound)."""
    faults = [f"message {i}: {why}" for i, why in conn.execute("""
        SELECT m.id, CASE
            WHEN m.parent_id IS NULL AND (m.depth != 0 OR m.root_id != m.id) THEN 'a bad root'
            WHEN m.parent_id IS NOT NULL AND p.id IS NULL THEN 'a missing parent'
            WHEN m.parent_id IS NOT NULL AND m.depth != p.depth + 1 THEN 'a depth not its parent''s + 1'
            WHEN m.parent_id IS NOT NULL AND m.root_id != p.root_id THEN 'a root not its parent''s'
            WHEN m.conversation_id IS NOT NULL AND c.id IS NULL THEN 'a writer that is gone'
        END FROM messages m LEFT JOIN messages p ON p.id = m.parent_id
        LEFT JOIN conversations c ON c.id = m.conversation_id""") if why]
    faults += [f"conversation {i}: its head is gone" for (i,) in conn.execute(
        "SELECT c.id FROM conversations c LEFT JOIN messages h ON h.id = c.head_id "
        "WHERE c.head_id IS NOT NULL AND h.id IS NULL")]
    if conn.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
        faults.append("integrity_check fails")
    faults += [f"foreign key: {tuple(r)}" for r in conn.execute("PRAGMA foreign_key_check")]
    return faults


def same_document(a: dict, b: dict) -> bool:
    """Exports equal but for the order conversations of the same creation time come in."""
    key = lambda c: c["uid"]   # noqa: E731
    return sorted(a["conversations"], key=key) == sorted(b["conversations"], key=key)


class TreeMachine(RuleBasedStateMachine):
    conversations = Bundle("conversations")
    messages = Bundle("messages")

    def __init__(self):
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="chatdb-tree-"))
        self.archive = Archive.open(self.dir / "a.db")
        self.paths: dict[int, list] = {}    # conversation id -> [(role, content)] to its head

    def teardown(self):
        self.archive.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _path(self, conv_id: int) -> list:
        head = self.archive.conversation(conv_id).head_id
        return [(m.role, m.content) for m in self.archive.path(head)] if head else []

    @rule(target=conversations, system=st.one_of(st.none(), TEXT.filter(bool)), title=TEXT,
          owner=st.sampled_from([None, "ann", "bo"]))
    def new(self, system, title, owner):
        conv = self.archive.create_conversation(title, system_prompt=system, owner=owner)
        self.paths[conv.id] = [("system", system)] if system else []
        return conv.id

    @rule(target=messages, conv=conversations, text=TEXT, role=st.sampled_from(["user", "assistant", "tool"]))
    def reply(self, conv, text, role):
        if conv not in self.paths:
            return None
        message = self.archive.add_message(conv, role, text)
        self.paths[conv].append((role, text))
        return (conv, message.id)

    @rule(target=conversations, point=messages)
    def fork(self, point):
        if point is None or not self.archive.has_message(point[1]):
            return None
        conv = self.archive.fork(point[1])
        self.paths[conv.id] = [(m.role, m.content) for m in self.archive.path(point[1])]
        return conv.id

    @rule(point=messages, text=TEXT)
    def edit(self, point, text):
        """As the console's edit (and retry, for an answer): a sibling, the head moved to it."""
        if point is None or point[0] not in self.paths or not self.archive.has_message(point[1]):
            return
        old = self.archive.message(point[1])
        if old.parent_id is None:
            return
        self.archive.add_message(point[0], old.role, text, parent_id=old.parent_id)
        self.paths[point[0]] = self._path(point[0])
        assert self.paths[point[0]][-1] == (old.role, text)

    @rule(point=messages)
    def retry(self, point):
        """An answer again: a sibling of the answer, under the same question."""
        if point is None or point[0] not in self.paths or not self.archive.has_message(point[1]):
            return
        old = self.archive.message(point[1])
        if old.role != "assistant" or old.parent_id is None:
            return
        self.archive.add_message(point[0], "assistant", old.content + "!", parent_id=old.parent_id)
        self.paths[point[0]] = self._path(point[0])

    @precondition(lambda self: self.paths)
    @rule(data=st.data())
    def delete(self, data):
        conv = data.draw(st.sampled_from(sorted(self.paths)))
        self.archive.delete_conversation(conv)
        del self.paths[conv]

    @rule()
    def export_import(self):
        """Export, import into a new archive, export again: the same document; importing
        it again into this archive adds nothing."""
        document = export_document(self.archive)
        data = json.dumps(document, ensure_ascii=False).encode()
        other = self.dir / f"copy-{len(list(self.dir.iterdir()))}.db"
        with Archive.open(other) as copy:
            import_bytes(copy, data, "export.json")
            assert tree_faults(copy.conn) == []
            assert same_document(export_document(copy), document)
        before = self.archive.count_messages()
        import_bytes(self.archive, data, "export.json")
        assert self.archive.count_messages() == before
        assert same_document(export_document(self.archive), document)

    @invariant()
    def paths_are_as_stored(self):
        for conv_id, expected in self.paths.items():
            assert self._path(conv_id) == expected

    @invariant()
    def the_forest_is_sound(self):
        assert tree_faults(self.archive.conn) == []
        wrong = [r for r in self.archive.conn.execute("SELECT role, content, content_hash FROM messages")
                 if content_hash(r[0], r[1]) != r[2]]
        assert wrong == []


TestTree = TreeMachine.TestCase
