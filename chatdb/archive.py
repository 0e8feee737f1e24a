"""The archive: conversations as named pointers into one forest of messages.

    archive = Archive.open("chats.db")
    conv = archive.create_conversation(title="Rust questions")
    question = archive.add_message(conv.id, "user", "What is a lifetime?")
    fork = archive.fork(question.id)          # shares `question`, copies nothing

Messages never change once written; editing or regenerating adds a sibling.
"""

import json
import sqlite3
import uuid
from pathlib import Path

from . import forest, queries as q
from .clock import now
from .costs import CostStore
from .errors import ChatdbError, NotFound
from .fingerprints import FingerprintCache
from .kv.budget import KVBudget
from .kv.keeping import KVKeeping
from .kv.store import KVStore
from .paths import default_db_path
from .records import ROLES, STATUSES, Conversation, ConversationSummary, Message
from .search.index_upkeep import merge_segments
from .search.textindex import index_text
from .settings import Settings
from .storage import dbapi, private_files
from .storage.connection import connect
from .storage.transaction import transaction
from .tags import Tags, tag_keys
from .token_sources import TokenSources
from .tokens import TokenStore

EVERYONE = object()   # list_conversations of every owner


class Archive:
    def __init__(self, conn: sqlite3.Connection, path: "Path | None" = None):
        self.conn = conn
        self.db_path = path
        self.tokens = TokenStore(conn)
        self.kv = KVStore(conn)
        self.fingerprints = FingerprintCache(conn)
        self.costs = CostStore(conn)
        self.token_sources = TokenSources(conn)
        self.settings = Settings(conn)
        self.tags = Tags(conn)
        self.kv_budget = KVBudget(self.settings, path)
        self.kv_keeping = KVKeeping(self)
        # Files of this archive that others could read until open() tightened them.
        self.tightened: list[private_files.Tightened] = []
        self.notes: list[str] = []   # what opening it did that the user should hear once

    @classmethod
    def open(cls, path: "str | Path | None" = None) -> "Archive":
        """Open (or create) the archive; an existing file others can read is made
        private (see `tightened`), once it is known to be a chatdb archive."""
        path = Path(path) if path else default_db_path()
        notes: list[str] = []
        archive = cls(connect(path, notes=notes), path)
        archive.notes = notes
        if str(path) != ":memory:":
            archive.tightened = private_files.tighten(
                path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm"))
        return archive

    def close(self) -> None:
        self.conn.close()

    @property
    def encrypted(self) -> bool:
        """Opened with a key (SQLCipher): every page of the file, and of its WAL, is encrypted."""
        return getattr(self.conn, "encrypted", False)

    @property
    def read_only(self) -> bool:
        """Opened read-only (its directory cannot be written, or the disk is full)."""
        return getattr(self.conn, "read_only", False)

    def __enter__(self) -> "Archive":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def transaction(self):
        return transaction(self.conn)

    # -- conversations -------------------------------------------------------

    def create_conversation(self, title: str = "", *, system_prompt: "str | None" = None,
                            model: "str | None" = None, head_id: "int | None" = None,
                            uid: "str | None" = None, created_at: "str | None" = None,
                            updated_at: "str | None" = None, meta: "dict | None" = None,
                            owner: "str | None" = None) -> Conversation:
        """A new conversation: empty, with `system_prompt` as its root system message,
        or continuing from the message `head_id` (whose path has its own system prompt)."""
        if system_prompt and head_id is not None:
            raise ChatdbError("a conversation continuing from a message keeps that path's "
                              "system prompt")
        created_at = created_at or now()
        with self.transaction():
            if head_id is not None:
                self.message(head_id)
            cur = self.conn.execute(q.INSERT_CONVERSATION, (
                uid or new_uid(), title, head_id, model, created_at,
                updated_at or created_at, meta_json(meta), owner))
            conv_id = cur.lastrowid
            if system_prompt:
                self.add_message(conv_id, "system", system_prompt, parent_id=None,
                                 created_at=created_at)
        return self.conversation(conv_id)

    def conversation(self, conv_id: int) -> Conversation:
        row = self.conn.execute(q.CONVERSATION, (conv_id,)).fetchone()
        if row is None:
            raise NotFound(f"no conversation {conv_id}")
        return Conversation.from_row(row)

    def conversation_by_uid(self, uid: str) -> "Conversation | None":
        row = self.conn.execute(q.CONVERSATION_BY_UID, (uid,)).fetchone()
        return Conversation.from_row(row) if row else None

    def list_conversations(self, limit: int = -1, offset: int = 0, *, tags=(),
                           pinned: bool = False, archived: "bool | None" = False,
                           owner=EVERYONE) -> list[ConversationSummary]:
        """Pinned first, then the most recently updated. Only those carrying every tag
        of `tags`, only pinned ones if `pinned`; `archived`: False leaves the archived
        out, True lists only them, None lists all; `owner`: only that user's (None: the
        archive's own)."""
        every = owner is EVERYONE
        params = {"limit": limit, "offset": offset, "all": every, "owner": None if every else owner}
        if tags:
            params["keys"] = json.dumps(tag_keys(tags))
            in_order = self.tags.in_order(params["keys"], limit + offset if limit >= 0 else 0)
            sql = (q.LIST_TAGGED_IN_ORDER if in_order else q.LIST_TAGGED)[archived, bool(pinned)]
        else:
            sql = q.LIST_CONVERSATIONS[archived, bool(pinned)]
        return [ConversationSummary.from_row(r) for r in self.conn.execute(sql, params)]

    def count_conversations(self) -> int:
        return self.conn.execute(q.COUNT_CONVERSATIONS).fetchone()[0]

    def latest_conversation(self) -> "Conversation | None":
        row = self.conn.execute(q.LATEST_CONVERSATION).fetchone()
        return Conversation.from_row(row) if row else None

    def rename(self, conv_id: int, title: str) -> None:
        self._update_conversation(q.RENAME_CONVERSATION, title, conv_id)

    def set_head(self, conv_id: int, message_id: "int | None") -> None:
        if message_id is not None:
            self.message(message_id)
        self._update_conversation(q.SET_HEAD, message_id, conv_id)

    def touch(self, conv_id: int) -> None:
        """Mark a conversation as the most recently used."""
        self._update_conversation(q.TOUCH_CONVERSATION, None, conv_id)

    def _update_conversation(self, sql: str, value, conv_id: int) -> None:
        with self.transaction():
            cur = self.conn.execute(sql, {"value": value, "id": conv_id, "now": now()})
            if cur.rowcount == 0:
                raise NotFound(f"no conversation {conv_id}")

    def fork(self, message_id: int, title: "str | None" = None) -> Conversation:
        """A new conversation continuing from `message_id`; no message is copied, only the
        tags of the conversation that wrote it."""
        with self.transaction():
            source = self.message(message_id)
            origin = self.conversation(source.conversation_id) if source.conversation_id else None
            if title is None:
                title = f"{origin.title} (fork)" if origin and origin.title else "fork"
            fork = self.create_conversation(
                title, head_id=message_id, model=origin.model if origin else None,
                meta={"forked_from": message_id}, owner=origin.owner if origin else None)
            if origin:
                self.tags.copy(origin.id, fork.id)
            return fork

    def delete_conversation(self, conv_id: int) -> int:
        """Delete a conversation and every message no other conversation reaches.

        Returns the number of messages removed (with their tokens, KV and index
        entries, in the same transaction).
        """
        with self.transaction():
            self.conversation(conv_id)
            return forest.delete_conversation(self.conn, conv_id)

    # -- messages ------------------------------------------------------------

    def add_message(self, conv_id: int, role: str, content: str, *,
                    parent_id: "int | None | type[...]" = ..., status: str = "complete",
                    meta: "dict | None" = None, created_at: "str | None" = None,
                    uid: "str | None" = None, move_head: bool = True) -> Message:
        """Append a message under `parent_id` (default: the conversation's head).

        The conversation's head moves to the new message unless move_head=False.
        """
        if role not in ROLES:
            raise ChatdbError(f"unknown role {role!r} (expected one of {', '.join(ROLES)})")
        if status not in STATUSES:
            raise ChatdbError(f"unknown status {status!r}")
        created_at = created_at or now()
        with self.transaction():
            if parent_id is ...:
                parent_id = self._head_of(conv_id)
            else:
                self._head_of(conv_id)  # NotFound for a conversation that is not there
            depth, root_id = self._place_under(parent_id)
            cur = self.conn.execute(q.INSERT_MESSAGE, {
                "uid": uid or new_uid(), "parent_id": parent_id, "root_id": root_id,
                "conversation_id": conv_id, "depth": depth, "role": role, "content": content,
                "status": status, "created_at": created_at, "meta": meta_json(meta)})
            message_id = cur.lastrowid
            if root_id is None:
                self.conn.execute(q.ROOT_ITSELF, (message_id,))
            self.conn.execute(q.INDEX_MESSAGE, (message_id, index_text(content)))
            if move_head:
                self.conn.execute(q.SET_HEAD, {"value": message_id, "id": conv_id, "now": now()})
        return self.message(message_id)

    def _head_of(self, conv_id: int) -> "int | None":
        row = self.conn.execute(q.HEAD_OF, (conv_id,)).fetchone()
        if row is None:
            raise NotFound(f"no conversation {conv_id}")
        return row[0]

    def _place_under(self, parent_id: "int | None") -> "tuple[int, int | None]":
        """(depth, root id) of a reply to `parent_id`; (0, None) for a new root."""
        if parent_id is None:
            return 0, None
        row = self.conn.execute(q.PLACE_UNDER, (parent_id,)).fetchone()
        if row is None:
            raise NotFound(f"no message {parent_id}")
        return row[0], row[1]

    def add_question(self, conv_id: int, content: str) -> Message:
        """The user's next message, read and written in one transaction.

        It hangs under the nearest message at or above the head that is not
        the user's: a head that is a question still without its answer (being
        answered by another process right now, or left by a crash) gets a
        sibling, not a question chained under it, so concurrent turns become
        branches, each answered from the path it hangs under.
        """
        with self.transaction():
            parent = self.conversation(conv_id).head_id
            while parent is not None and (above := self.message(parent)).role == "user":
                parent = above.parent_id
            return self.add_message(conv_id, "user", content, parent_id=parent)

    def advance_head(self, conv_id: int, expected: "int | None", message_id: int) -> bool:
        """Move the head to `message_id` if it is still at `expected` (False: someone moved it)."""
        with self.transaction():
            cur = self.conn.execute(q.ADVANCE_HEAD, {"new": message_id, "id": conv_id,
                                                    "expected": expected, "now": now()})
            return cur.rowcount == 1

    def retract(self, message_id: int) -> bool:
        """Remove a message just written that nothing hangs under (a turn that failed);
        heads at it go back to its parent. False if it has children (then it stays)."""
        with self.transaction():
            parent = self.message(message_id).parent_id
            if self.children(message_id):
                return False
            self.conn.execute(q.HEADS_BACK, {"parent": parent, "id": message_id, "now": now()})
            self.conn.execute(q.DELETE_LEAF, (message_id, message_id))
            return True

    def message(self, message_id: int) -> Message:
        row = self.conn.execute(q.MESSAGE, (message_id,)).fetchone()
        if row is None:
            raise NotFound(f"no message {message_id}")
        return Message.from_row(row)

    def children(self, message_id: int) -> list[Message]:
        """The replies to a message, oldest first (a failed turn is taken back only without any)."""
        return [Message.from_row(r) for r in self.conn.execute(q.CHILDREN, (message_id,))]

    def has_message(self, message_id: int) -> bool:
        return self.conn.execute(q.MESSAGE_EXISTS, (message_id,)).fetchone() is not None

    def message_by_uid(self, uid: str) -> "Message | None":
        row = self.conn.execute(q.MESSAGE_BY_UID, (uid,)).fetchone()
        return Message.from_row(row) if row else None

    def path(self, message_id: "int | None") -> list[Message]:
        """The messages from the root down to `message_id`: its whole context."""
        if message_id is None:
            return []
        rows = self.conn.execute(q.PATH, {"message_id": message_id}).fetchall()
        if not rows:
            raise NotFound(f"no message {message_id}")
        return [Message.from_row(r) for r in rows]

    def messages(self, conv_id: int) -> list[Message]:
        """A conversation's current path, root to head."""
        return self.path(self.conversation(conv_id).head_id)

    def tree(self, conv_id: int) -> list[Message]:
        """Every message the conversation reaches (all its branches), by depth then id."""
        self.conversation(conv_id)
        return [Message.from_row(r) for r in self.conn.execute(q.CONVERSATION_TREE, (conv_id,))]

    def count_messages(self) -> int:
        return self.conn.execute(q.COUNT_MESSAGES).fetchone()[0]

    def written_after(self, message_id: int) -> "tuple[int, int | None]":
        """(how many messages were written after `message_id`, the newest of them)."""
        count, newest = self.conn.execute(q.WRITTEN_AFTER, (message_id,)).fetchone()
        return count, newest

    def merge_text_index(self, stop=lambda: False) -> int:
        """Merge the full-text index into one segment when it is in many (after an
        import, and now and then while chats are written): the steps taken, 0 if none."""
        return merge_segments(self.conn, stop=stop)

    def integrity_check(self) -> str:
        """SQLite's integrity_check: "ok", or the first thing it finds wrong."""
        try:
            return self.conn.execute("PRAGMA integrity_check").fetchone()[0]
        except dbapi.DatabaseError as exc:  # a page too damaged to walk
            return str(exc)

    def damage(self) -> "str | None":
        """What SQLite's quick_check finds wrong with the file (its first line), or None.
        A damaged page is otherwise found only by a read that happens to need it."""
        try:
            first = self.conn.execute("PRAGMA quick_check").fetchone()[0]
        except dbapi.DatabaseError as exc:
            return str(exc)
        return None if first == "ok" else first


def meta_json(meta: "dict | None") -> str:
    """A meta object as stored. Written with its text as is (not escaped), so that a lone
    surrogate (JSON's "\\ud800", an undecodable byte) is refused here, like in any other
    column, instead of being stored escaped and breaking every later export."""
    text = json.dumps(meta or {}, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ChatdbError(f"meta holds a lone surrogate \\u{ord(text[exc.start]):04x}, "
                          "which is not text") from None
    return text


def new_uid() -> str:
    return uuid.uuid4().hex
