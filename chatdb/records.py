"""The archive's records as plain values."""

import json
import sqlite3
from dataclasses import dataclass, field

ROLES = ("system", "user", "assistant", "tool")
STATUSES = ("complete", "interrupted")


@dataclass(frozen=True)
class Message:
    id: int
    uid: str
    parent_id: "int | None"
    conversation_id: "int | None"
    depth: int
    role: str
    content: str
    status: str
    created_at: str
    meta: dict = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> "Message":
        return cls(**{**dict(row), "meta": json.loads(row["meta"])})


@dataclass(frozen=True)
class Conversation:
    id: int
    uid: str
    title: str
    head_id: "int | None"
    system_prompt: "str | None"
    model: "str | None"
    created_at: str
    updated_at: str
    meta: dict = field(default_factory=dict)
    owner: "str | None" = None    # the key's name that created it on a shared server

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> "Conversation":
        return cls(**{**dict(row), "meta": json.loads(row["meta"])})


@dataclass(frozen=True)
class ConversationSummary:
    id: int
    title: str
    updated_at: str
    message_count: int
    owner: "str | None" = None
    pinned: bool = False
    archived: bool = False
    tags: list = field(default_factory=list)   # as written, in order of their keys

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> "ConversationSummary":
        """From a listing's row (queries.LISTED: these columns in this order, the tags a
        JSON array in the order of their keys); by position: a listing may be 10,000 rows."""
        conv_id, title, updated_at, count, owner, pinned, archived, tags = row
        return cls(conv_id, title, updated_at, count, owner, bool(pinned), bool(archived),
                   json.loads(tags))
