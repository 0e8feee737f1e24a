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
from .storage.transaction import transaction

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

# The conversations carrying every tag of :keys (a JSON array of keys, each once): the
# rows of its rarest tag, read by the tag's index, each checked for the others.
TAGGED = """
WITH wanted(id, carried) AS (
    SELECT t.id, (SELECT count(*) FROM conversation_tags x WHERE x.tag_id = t.id)
    FROM tags t WHERE t.key IN (SELECT value FROM json_each(:keys)))
SELECT ct.conversation_id FROM conversation_tags ct
WHERE ct.tag_id = (SELECT id FROM wanted ORDER BY carried LIMIT 1)
  AND (SELECT count(*) FROM wanted) = json_array_length(:keys)
  AND (json_array_length(:keys) = 1 OR NOT EXISTS (SELECT 1 FROM wanted w WHERE NOT EXISTS (
        SELECT 1 FROM conversation_tags x WHERE x.conversation_id = ct.conversation_id
                                             AND x.tag_id = w.id)))"""

# Whether conversation c carries every tag of :keys (a listing's row, checked).
CARRIES_ALL = """(SELECT count(*) FROM conversation_tags x JOIN tags t ON t.id = x.tag_id
     WHERE x.conversation_id = c.id AND t.key IN (SELECT value FROM json_each(:keys)))
    = json_array_length(:keys)"""
# How many conversations carry the rarest tag of :keys (0: one is no tag at all), and
# the largest conversation id, which is about how many there are.
RAREST_AND_ALL = """
SELECT CASE WHEN count(*) = json_array_length(:keys) THEN coalesce(min(carried), 0) ELSE 0 END,
       (SELECT coalesce(max(id), 0) FROM conversations)
FROM (SELECT (SELECT count(*) FROM conversation_tags x WHERE x.tag_id = t.id) AS carried
      FROM tags t WHERE t.key IN (SELECT value FROM json_each(:keys)))"""

# What conversations reach (:convs, a JSON array of ids), as a search filters by tag: the
# messages they wrote (an index read), and above those a fork's shared start: the path above
# the head of a fork (meta.forked_from, as `fork` and an import of one record it) or of one
# that wrote nothing yet. Walked for those only: telling every conversation's start
# apart would read a message row of each.
ABOVE_FORKED = """
WITH RECURSIVE forked(head) AS (
    SELECT c.head_id FROM conversations c
    WHERE c.id IN (SELECT value FROM json_each(:convs)) AND c.head_id IS NOT NULL
      AND (json_extract(c.meta, '$.forked_from') IS NOT NULL
           OR NOT EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.id))),
above(id) AS (
    SELECT head FROM forked
    UNION
    -- A scalar lookup, not a join: on a join SQLite 3.40 builds a Bloom filter over
    -- the messages table for every step (4 ms each at 1M messages). A root's NULL
    -- parent ends the walk (and is left out below).
    SELECT (SELECT m.parent_id FROM messages m WHERE m.id = a.id) FROM above a
    WHERE a.id IS NOT NULL)"""
FORK_STARTS = ABOVE_FORKED + "\nSELECT id FROM above WHERE id IS NOT NULL"
# As one JSON array: a rare tag's 10,000 ids read as rows cost 3 ms more.
WRITTEN_BY_CONVERSATIONS = """
SELECT json_group_array(id) FROM (
    SELECT id FROM messages WHERE conversation_id IN (SELECT value FROM json_each(:convs))
    ORDER BY id)"""
# A guess at a conversation's messages: the newest ids of each, divided.
MESSAGES_PER_CONVERSATION = """
SELECT (SELECT coalesce(max(id), 0) FROM messages) * 1.0
       / max(1, (SELECT coalesce(max(id), 0) FROM conversations))"""


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

    def conversations(self, names) -> list[int]:
        """Ids of the conversations carrying every tag of `names`."""
        return self._ids(TAGGED, {"keys": json.dumps(tag_keys(names))})

    def reached_by(self, conv_ids: list[int]) -> list[int]:
        """Ids of every message the conversations reach (that a search by tag looks at),
        ascending: what they wrote, and their forks' starts merged in (two statements: as
        one UNION, SQLite sorted the 10,000 ids of a rare tag once more, 3 ms)."""
        written = json.loads(self.conn.execute(WRITTEN_BY_CONVERSATIONS,
                                               {"convs": json.dumps(conv_ids)}).fetchone()[0])
        starts = self.fork_starts(conv_ids)
        return sorted(set(written).union(starts)) if starts else written

    def fork_starts(self, conv_ids: list[int]) -> list[int]:
        """The messages above the conversations that others wrote (their forks' starts)."""
        return self._ids(FORK_STARTS, {"convs": json.dumps(conv_ids)})

    def in_order(self, keys_json: str, wanted: int) -> bool:
        """Whether the first `wanted` conversations carrying every tag are found sooner by
        reading the listing in order and checking each (a common tag) than by reading the
        tag's own rows and ordering them (a rare one, or all of them wanted)."""
        carried, conversations = self.conn.execute(RAREST_AND_ALL, {"keys": keys_json}).fetchone()
        return 0 < wanted and wanted * conversations < carried * carried

    def messages_per_conversation(self) -> float:
        return self.conn.execute(MESSAGES_PER_CONVERSATION).fetchone()[0]

    def _ids(self, sql: str, params: dict) -> list[int]:
        cursor = self.conn.cursor()
        cursor.row_factory = None   # plain tuples: a tag may reach 100,000 messages
        return [row[0] for row in cursor.execute(sql, params)]

    def _exists(self, conv_id: int) -> None:
        if self.conn.execute(FLAGS_OF, (conv_id,)).fetchone() is None:
            raise NotFound(f"no conversation {conv_id}")
