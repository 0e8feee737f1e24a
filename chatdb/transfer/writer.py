"""Writing import records into the archive as they are read: all or nothing, and only once.

The caller holds one transaction for the whole file, so a file that fails
half-way leaves the archive as it was. A conversation or message whose uid is
already in the archive is a duplicate and is skipped (an existing
conversation still gains the messages it lacks); a second import of the same
file adds nothing.

Each conversation's entry is written when it is read, so that only one is
ever in memory; the archive itself answers which uids are known. Two kinds of
link may name something later in the file, and wait for it:
- a message's writer: a fork's entry lists the history it shares with its
  origin, whose entry may come after it. Such a message is written as the
  importing conversation's and handed to its writer when that entry arrives
  (a writer that never does leaves it with the importing one);
- a head or fork source that is a message of a later entry: that
  conversation's head and meta are set at the end of the file.
Messages are inserted a batch at a time, with their row ids (the
transaction holds the write lock: no one else takes one) and content hashes
given here, and the uids of a conversation's messages are looked up at once.
"""

import json
from array import array
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Iterator

from .. import queries as q
from ..archive import Archive, meta_json
from ..content_hash import content_hash
from ..errors import ChatdbError
from ..search.textindex import index_text
from .records import ConversationRecord, MessageRecord, fail, parents_first

BATCH = 2000   # messages inserted per executemany
# SQLite's page cache while importing, in KiB: the indexes on messages take
# rows in no order (uid, content hash), and with the default 2 MB most rows
# sent a page out and back; 32 MB imports 1M messages 1.45x faster (no gain past it).
CACHE_KIB = 32 << 10
# Its mere presence makes SQLite keep a statement journal for each INSERT (a
# trigger could fail half-way): a copy of every page the row changes, 2.5x the
# cost of the row itself. Rows an import writes come with their hash, so it is
# set aside while they are written, inside the transaction, which brings it back
# whatever happens.
HASH_TRIGGER = "messages_content_hash_insert"

TRIGGER_SQL = "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?"
LAST_CONVERSATION_ID = "SELECT coalesce(max(id), 0) FROM conversations"
CONVERSATION_ID = "SELECT id FROM conversations WHERE uid = ?"
MESSAGE_ID = "SELECT id FROM messages WHERE uid = ?"
# Where a reply to each message goes: its id, one deeper, in the same tree.
PLACES_BY_UID = """
SELECT uid, id, depth + 1, root_id FROM messages WHERE uid IN (SELECT value FROM json_each(?))"""
# With its content hash (the insert trigger then has nothing to do).
WRITE_MESSAGE = """
INSERT INTO messages (id, uid, parent_id, root_id, conversation_id, depth, role, content,
                      status, created_at, meta, content_hash)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""
# A conversation's row is written after its messages (links are checked at the
# commit: PRAGMA defer_foreign_keys), once, with its head: an UPDATE of each row
# afterwards cost as much as writing all its messages.
INSERT_CONVERSATION = """
INSERT INTO conversations (id, uid, title, head_id, model, created_at, updated_at, meta,
                           pinned, archived, owner)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""
SETTLE_CONVERSATION = "UPDATE conversations SET head_id = ?, meta = ? WHERE id = ?"
SET_OWNER = "UPDATE messages SET conversation_id = ? WHERE id IN (SELECT value FROM json_each(?))"


@dataclass
class ImportReport:
    format: str = ""
    conversations: int = 0             # created
    messages: int = 0                  # created
    duplicate_conversations: int = 0   # already in the archive
    duplicate_messages: int = 0
    skipped: int = 0                   # entries of the file that are not messages chatdb keeps


# (row id, depth of a reply, root id) of a message written or found
Place = tuple[int, int, int]


@contextmanager
def import_transaction(archive: Archive, report: ImportReport) -> Iterator["ImportWriter"]:
    """An ImportWriter, in one transaction committed only if everything was written."""
    conn = archive.conn
    if conn.in_transaction:   # the trigger set aside must come back with this one's end
        raise ChatdbError("an import is a transaction of its own")
    with archive.transaction():
        cache = conn.execute("PRAGMA cache_size").fetchone()[0]
        conn.execute(f"PRAGMA cache_size = {-CACHE_KIB}")
        conn.execute("PRAGMA defer_foreign_keys = ON")   # off again at the commit
        try:
            trigger = conn.execute(TRIGGER_SQL, (HASH_TRIGGER,)).fetchone()
            if trigger:
                conn.execute(f"DROP TRIGGER {HASH_TRIGGER}")
            writer = ImportWriter(archive, report)
            yield writer
            writer.finish()
            if trigger:
                conn.execute(trigger[0])
        finally:
            conn.execute(f"PRAGMA cache_size = {int(cache)}")


class ImportWriter:
    """Writes one conversation's record at a time, inside import_transaction."""

    def __init__(self, archive: Archive, report: ImportReport):
        self.conn = archive.conn
        self.tags = archive.tags
        self.report = report
        last = self.conn.execute(q.LAST_MESSAGE_ID).fetchone()[0]
        self._next_id = self._first_new = last + 1   # ids from here on are this import's
        self._next_conversation = self.conn.execute(LAST_CONVERSATION_ID).fetchone()[0] + 1
        self._counted = bytearray(last // 8 + 1)     # messages already there, counted once
        self._rows: list[tuple] = []                 # messages not yet inserted...
        self._index: list[tuple] = []                # ...and their text for the index
        self._orphans: dict[str, array] = {}         # writer's uid -> ids it wrote, till it comes
        self._unsettled: list[tuple[ConversationRecord, int]] = []

    def write(self, record: ConversationRecord) -> None:
        self.report.skipped += record.skipped
        order = _parents_first(record)
        existing = self.conn.execute(CONVERSATION_ID, (record.uid,)).fetchone()
        conv_id = existing[0] if existing else self._next_conversation
        placed = self._places(record)   # what the archive has already
        owners: dict[str, "int | None"] = {record.uid: conv_id}
        for message in order:
            self._message(message, conv_id, placed, owners)
        if existing:   # imported before: its tags join the ones it has (given since, kept)
            self.report.duplicate_conversations += 1
            if record.tags:
                self.tags.add(conv_id, record.tags)
        else:
            self._create(record, conv_id, placed)
        self._flush()

    def finish(self) -> None:
        """After the last record: what waited for a later entry."""
        self._flush()
        for record, conv_id in self._unsettled:
            head_id, meta = self._settled(record, {}, final=True)
            self.conn.execute(SETTLE_CONVERSATION, (head_id, meta, conv_id))
        self._unsettled.clear()

    def _create(self, record: ConversationRecord, conv_id: int, placed: dict) -> None:
        """The conversation's row, written once its messages have their ids, with its
        head, meta and update time as the file has them (the system prompt is the
        root system message, imported with the messages)."""
        settled = self._settled(record, placed, final=False)
        if settled is None:
            self._unsettled.append((replace(record, messages=[]), conv_id))
        head_id, meta = settled or (None, meta_json(None))
        self.conn.execute(INSERT_CONVERSATION, (
            conv_id, record.uid, record.title, head_id, record.model, record.created_at,
            record.updated_at or record.created_at, meta, int(record.pinned), int(record.archived),
            record.owner))
        if record.tags:
            self.tags.add(conv_id, record.tags)
        self._next_conversation += 1
        self.report.conversations += 1
        written = self._orphans.pop(record.uid, None)
        if written:   # messages of an earlier entry that this one wrote
            self.conn.execute(SET_OWNER, (conv_id, json.dumps(written.tolist())))

    def _settled(self, record: ConversationRecord, placed: dict, *, final: bool
                 ) -> "tuple[int | None, str] | None":
        """(head id, meta as stored); None, unless `final`, while the head or the fork
        source is a message not written yet."""
        head_id = self._message_id(record.head_uid, placed)
        meta = dict(record.meta)
        source = meta.pop("forked_from", None)  # exported as a message uid; stored as its id
        source_id = self._message_id(source, placed) if isinstance(source, str) else None
        waiting = ((record.head_uid is not None and head_id is None)
                   or (isinstance(source, str) and source_id is None))
        if waiting and not final:
            return None
        if record.head_uid is not None and head_id is None:
            raise fail(record.where, f'head "{record.head_uid}" is not one of its messages')
        if source_id is not None:
            meta["forked_from"] = source_id
        return head_id, meta_json(meta)

    def _places(self, record: ConversationRecord) -> "dict[str, Place]":
        """The record's messages and parents that are in the archive, by uid."""
        uids = {m.uid for m in record.messages} | {m.parent_uid for m in record.messages}
        uids.discard(None)
        rows = self.conn.execute(PLACES_BY_UID, (json.dumps(list(uids)),))
        return {uid: (message_id, depth, root_id) for uid, message_id, depth, root_id in rows}

    def _message(self, message: MessageRecord, conv_id: int, placed: dict, owners: dict) -> None:
        found = placed.get(message.uid)
        if found is not None:   # in the archive, or shared with an entry written before
            self._count_duplicate(found[0])
            return
        parent_id, depth, root_id = None, 0, None
        if message.parent_uid is not None:
            above = placed.get(message.parent_uid)
            if above is None:
                raise fail(message.where, f'parent "{message.parent_uid}" is neither in the file '
                                          "nor in the archive")
            parent_id, depth, root_id = above
        message_id = self._next_id
        self._next_id += 1
        root_id = message_id if root_id is None else root_id
        self._rows.append((
            message_id, message.uid, parent_id, root_id,
            self._owner(message.owner_uid, conv_id, owners, message_id), depth, message.role,
            message.content, message.status, message.created_at, meta_json(message.meta),
            content_hash(message.role, message.content)))
        self._index.append((message_id, index_text(message.content)))
        placed[message.uid] = (message_id, depth + 1, root_id)
        self.report.messages += 1
        if len(self._rows) >= BATCH:
            self._flush()

    def _owner(self, owner_uid: "str | None", conv_id: int, owners: dict,
               message_id: int) -> "int | None":
        """The writing conversation's id (None: no writer any more). One not in the
        archive yet may come later in the file: till then, the importing conversation."""
        if owner_uid is None:
            return None
        if owner_uid not in owners:
            row = self.conn.execute(CONVERSATION_ID, (owner_uid,)).fetchone()
            owners[owner_uid] = row[0] if row else None
        if owners[owner_uid] is None:
            self._orphans.setdefault(owner_uid, array("q")).append(message_id)
            return conv_id
        return owners[owner_uid]

    def _count_duplicate(self, message_id: int) -> None:
        """A message that was there before the import counts once, however many entries list it."""
        if message_id >= self._first_new:
            return
        byte, bit = divmod(message_id, 8)
        if not self._counted[byte] >> bit & 1:
            self._counted[byte] |= 1 << bit
            self.report.duplicate_messages += 1

    def _flush(self) -> None:
        if self._rows:
            self.conn.executemany(WRITE_MESSAGE, self._rows)
            self.conn.executemany(q.INDEX_MESSAGE, self._index)
            self._rows, self._index = [], []

    def _message_id(self, uid: "str | None", placed: dict) -> "int | None":
        if uid is None:
            return None
        if uid in placed:
            return placed[uid][0]
        row = self.conn.execute(MESSAGE_ID, (uid,)).fetchone()
        return row[0] if row else None


def _parents_first(record: ConversationRecord) -> list[MessageRecord]:
    """The messages in file order, except that a child waits for its parent."""
    seen = set()
    for message in record.messages:
        if message.uid in seen:
            raise fail(message.where, "appears twice in the conversation")
        seen.add(message.uid)
    order, looped = parents_first(record.messages, lambda m: m.uid, lambda m: m.parent_uid)
    if looped is not None:
        raise fail(looped.where, "its parent links form a cycle")
    return order
