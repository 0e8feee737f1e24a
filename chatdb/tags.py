"""Tags, pins and the archived flag of conversations.

    archive.tags.add(conv_id, ["Rust", "work"])       # "rust" later names the same tag
    archive.tags.set_flag(conv_id, "pinned", True)
    archive.list_conversations(tags=["rust"])          # pinned first, archived left out

A tag is any text a person would write on a label: Unicode, spaces inside,
matched without regard to case. What cannot be a label is refused in one
line (tag_name): empty, longer than MAX_TAG characters, control characters
(a newline included), or a lone surrogate, which is not text.
"""

import json
import sqlite3
import unicodedata

from .errors import ChatdbError, NotFound
from .transaction import transaction

MAX_TAG = 100        # characters: a label, not a note
FLAGS = ("pinned", "archived")
NOT_TEXT = ("Cc", "Cs", "Zl", "Zp")   # control, lone surrogate, line and paragraph separators

FIND_TAG = "SELECT id FROM tags WHERE key = ?"
NEW_TAG = "INSERT INTO tags (name, key) VALUES (?, ?)"
TAG_CONVERSATION = "INSERT OR IGNORE INTO conversation_tags (conversation_id, tag_id) VALUES (?, ?)"
UNTAG_CONVERSATION = """
DELETE FROM conversation_tags
WHERE conversation_id = ? AND tag_id = (SELECT id FROM tags WHERE key = ?)"""
TAGS_OF = """
SELECT t.name FROM conversation_tags ct JOIN tags t ON t.id = ct.tag_id
WHERE ct.conversation_id = ? ORDER BY t.key"""
COPY_TAGS = """
INSERT OR IGNORE INTO conversation_tags (conversation_id, tag_id)
SELECT ?, tag_id FROM conversation_tags WHERE conversation_id = ?"""
TAG_COUNTS = """
SELECT t.name, count(*) AS conversations FROM tags t JOIN conversation_tags ct ON ct.tag_id = t.id
GROUP BY t.id ORDER BY conversations DESC, t.key"""
SET_FLAG = {flag: f"UPDATE conversations SET {flag} = :value WHERE id = :id" for flag in FLAGS}
FLAGS_OF = "SELECT pinned, archived FROM conversations WHERE id = ?"

# The conversations carrying every tag of :keys (a JSON array of keys, each once):
# started from the tags, so that a rare tag costs its own rows only.
TAGGED = """
SELECT ct.conversation_id FROM conversation_tags ct
WHERE ct.tag_id IN (SELECT id FROM tags WHERE key IN (SELECT value FROM json_each(:keys)))
GROUP BY ct.conversation_id HAVING count(*) = json_array_length(:keys)"""

# What the conversations carrying every tag of :keys reach, as a search filters it: the
# messages they wrote, their heads, and everything above those (a fork's shared start).
REACHED_BY_TAGGED = f"""
WITH RECURSIVE tagged(id) AS ({TAGGED}),
reached(id) AS (
    SELECT id FROM messages WHERE conversation_id IN (SELECT id FROM tagged)
    UNION
    SELECT head_id FROM conversations WHERE id IN (SELECT id FROM tagged) AND head_id IS NOT NULL
    UNION
    SELECT m.parent_id FROM messages m JOIN reached r ON m.id = r.id
    WHERE m.parent_id IS NOT NULL
)
SELECT id FROM reached ORDER BY id"""


class TagError(ChatdbError):
    """A tag that cannot be one (the message says why)."""


def tag_name(text) -> tuple[str, str]:
    """(the name as kept, its key) of a tag as written; TagError if it cannot be a tag."""
    if not isinstance(text, str):
        raise TagError(f"a tag is text, not {type(text).__name__}")
    name = unicodedata.normalize("NFC", text.strip()) if _encodable(text) else text.strip()
    if not name:
        raise TagError("a tag cannot be empty")
    if len(name) > MAX_TAG:
        raise TagError(f"a tag is at most {MAX_TAG} characters; this one has {len(name):,}")
    for i, char in enumerate(name):
        category = unicodedata.category(char)
        if category in NOT_TEXT:
            what = "a lone surrogate" if category == "Cs" else "a control character"
            raise TagError(f"a tag cannot hold {what} (U+{ord(char):04X} at character {i + 1})")
    return name, name.casefold()


def tag_keys(names) -> list[str]:
    """The keys of tags as written, each once, in order (TagError for one that is not a tag)."""
    return list(dict.fromkeys(tag_name(name)[1] for name in names))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class Tags:
    """The tags and flags of one archive's conversations."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def add(self, conv_id: int, names) -> list[str]:
        """Tag a conversation; returns its tags after. A tag it has already is kept once."""
        named = [tag_name(n) for n in names]
        with transaction(self.conn):
            self._exists(conv_id)
            for name, key in named:
                row = self.conn.execute(FIND_TAG, (key,)).fetchone()
                tag_id = row[0] if row else self.conn.execute(NEW_TAG, (name, key)).lastrowid
                self.conn.execute(TAG_CONVERSATION, (conv_id, tag_id))
            return self.of(conv_id)

    def remove(self, conv_id: int, names) -> list[str]:
        """Take tags off a conversation (one it lacks changes nothing); its tags after."""
        keys = tag_keys(names)
        with transaction(self.conn):
            self._exists(conv_id)
            for key in keys:
                self.conn.execute(UNTAG_CONVERSATION, (conv_id, key))
            return self.of(conv_id)

    def of(self, conv_id: int) -> list[str]:
        return [row[0] for row in self.conn.execute(TAGS_OF, (conv_id,))]

    def counts(self) -> list[tuple[str, int]]:
        """Every tag with the number of conversations carrying it, most used first."""
        return [(row[0], row[1]) for row in self.conn.execute(TAG_COUNTS)]

    def copy(self, source_id: int, target_id: int) -> None:
        """Give `target_id` the tags of `source_id` (a fork those of its origin)."""
        self.conn.execute(COPY_TAGS, (target_id, source_id))

    def set_flag(self, conv_id: int, flag: str, value: bool) -> None:
        """Pin or unpin, archive or unarchive; the conversation's update time stays."""
        if flag not in FLAGS:
            raise ChatdbError(f"unknown flag {flag!r} (expected one of {', '.join(FLAGS)})")
        with transaction(self.conn):
            if self.conn.execute(SET_FLAG[flag], {"value": int(bool(value)),
                                                  "id": conv_id}).rowcount == 0:
                raise NotFound(f"no conversation {conv_id}")

    def flags(self, conv_id: int) -> dict:
        row = self.conn.execute(FLAGS_OF, (conv_id,)).fetchone()
        if row is None:
            raise NotFound(f"no conversation {conv_id}")
        return {"pinned": bool(row[0]), "archived": bool(row[1])}

    def reached(self, names) -> list[int]:
        """Ids of every message the conversations carrying all of `names` reach, ascending."""
        keys = tag_keys(names)
        return [row[0] for row in self.conn.execute(REACHED_BY_TAGGED,
                                                    {"keys": json.dumps(keys)})]

    def _exists(self, conv_id: int) -> None:
        if self.conn.execute(FLAGS_OF, (conv_id,)).fetchone() is None:
            raise NotFound(f"no conversation {conv_id}")
