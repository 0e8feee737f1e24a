"""Exporting conversations as one JSON document (everything but tokens and KV).

    {"format": "chatdb-export", "version": 1, "conversations": [
        {"uid", "title", "created_at", "updated_at", "system_prompt", "model",
         "meta", "head", "tags", "pinned", "archived", "owner",
         "messages": [{"uid", "parent", "conversation", "role", "content",
                       "status", "created_at", "meta"}, ...]}, ...]}

Each conversation carries its whole tree (every branch), parents before
children. Links are uids, never row ids, so the document means the same in
any archive: `head` and `parent` are message uids, `conversation` is the uid
of the conversation that wrote the message (a fork shares its ancestors'
messages, so they appear under both; null once their writer is deleted).
`system_prompt` is the content of the root system message of the head's path
(or null), for readers: import takes the prompt from that message itself.
`owner` names the user of a shared server whose key created it (null: the
archive's own user). Tokens and KV are left out: they belong to one model
build and are rebuilt.
"""

from ..archive import Archive
from ..records import Conversation, Message
from ..storage.transaction import read_snapshot

FORMAT = "chatdb-export"
VERSION = 1

CONVERSATION_UID = "SELECT uid FROM conversations WHERE id = ?"
MESSAGE_UID = "SELECT uid FROM messages WHERE id = ?"
# Oldest first, so an import numbers conversations in the same order.
ALL_CONVERSATIONS = "SELECT id FROM conversations ORDER BY created_at, id"


def export_document(archive: Archive, conv_ids: "list[int] | None" = None) -> dict:
    """The export of `conv_ids` (each once, in the order given), or of every conversation."""
    with read_snapshot(archive.conn):
        if conv_ids is None:
            conv_ids = all_conversation_ids(archive)
        uids = _UidCache(archive)
        conversations = [export_conversation(archive, cid, uids) for cid in dict.fromkeys(conv_ids)]
    return {"format": FORMAT, "version": VERSION, "conversations": conversations}


def all_conversation_ids(archive: Archive) -> list[int]:
    return [row[0] for row in archive.conn.execute(ALL_CONVERSATIONS)]


def export_conversation(archive: Archive, conv_id: int, uids: "_UidCache | None" = None) -> dict:
    uids = uids or _UidCache(archive)
    conv = archive.conversation(conv_id)
    return {
        "uid": conv.uid,
        "title": conv.title,
        "created_at": conv.created_at,
        "updated_at": conv.updated_at,
        "system_prompt": conv.system_prompt,
        "model": conv.model,
        "meta": _portable_meta(conv, uids),
        "head": uids.message(conv.head_id),
        "tags": archive.tags.of(conv_id),
        **archive.tags.flags(conv_id),
        "owner": conv.owner,
        "messages": [_message(m, uids) for m in archive.tree(conv_id)],
    }


def _message(message: Message, uids: "_UidCache") -> dict:
    return {
        "uid": message.uid,
        "parent": uids.message(message.parent_id),
        "conversation": uids.conversation(message.conversation_id),
        "role": message.role,
        "content": message.content,
        "status": message.status,
        "created_at": message.created_at,
        "meta": message.meta,
    }


def _portable_meta(conv: Conversation, uids: "_UidCache") -> dict:
    """meta with the fork source as a message uid: a row id means nothing elsewhere."""
    meta = dict(conv.meta)
    source = meta.pop("forked_from", None)
    if isinstance(source, int):
        source = uids.message(source)
    if source is not None:
        meta["forked_from"] = source
    return meta


class _UidCache:
    """Row id -> uid, asked of the database once per id."""

    def __init__(self, archive: Archive):
        self.conn = archive.conn
        self.messages: dict[int, "str | None"] = {}
        self.conversations: dict[int, "str | None"] = {}

    def message(self, message_id: "int | None") -> "str | None":
        return self._lookup(self.messages, MESSAGE_UID, message_id)

    def conversation(self, conv_id: "int | None") -> "str | None":
        return self._lookup(self.conversations, CONVERSATION_UID, conv_id)

    def _lookup(self, cache: dict, sql: str, row_id: "int | None") -> "str | None":
        if row_id is None:
            return None
        if row_id not in cache:
            row = self.conn.execute(sql, (row_id,)).fetchone()
            cache[row_id] = row[0] if row else None
        return cache[row_id]
