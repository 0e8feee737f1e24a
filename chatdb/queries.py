"""Named SQL for conversations and messages. Parameters are always bound."""

from .tags import CARRIES_ALL, TAGGED

# A conversation's system prompt is the system message at the root of its
# head's path (messages.root_id): what the model reads, never a copy.
CONVERSATION_SELECT = """
SELECT c.id, c.uid, c.title, c.head_id,
    (SELECT r.content FROM messages h JOIN messages r ON r.id = h.root_id
     WHERE h.id = c.head_id AND r.role = 'system') AS system_prompt,
    c.model, c.created_at, c.updated_at, c.meta, c.owner
FROM conversations c"""
MESSAGE_COLUMNS = "id, uid, parent_id, conversation_id, depth, role, content, status, created_at, meta"

INSERT_CONVERSATION = """
INSERT INTO conversations (uid, title, head_id, model, created_at, updated_at, meta, owner)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)"""

CONVERSATION = CONVERSATION_SELECT + " WHERE c.id = ?"
CONVERSATION_BY_UID = CONVERSATION_SELECT + " WHERE c.uid = ?"
LATEST_CONVERSATION = CONVERSATION_SELECT + " ORDER BY c.updated_at DESC, c.id DESC LIMIT 1"
COUNT_CONVERSATIONS = "SELECT count(*) FROM conversations"
LAST_MESSAGE_ID = "SELECT coalesce(max(id), 0) FROM messages"   # 0: none yet
HEAD_OF = "SELECT head_id FROM conversations WHERE id = ?"

# message_count: the messages on the current path but its root system
# prompt, as the console numbers them; from the head's depth, with no walk.
# Pinned first, then the most recently updated. Each query is there six times, by
# (archived, pinned only): archived False leaves the archived out, True lists only
# them, None all. An equality on the columns, not a bound NULL-or test, is what
# lets a page (or only the pinned) be read in the index's order.
# The page's ids are chosen first (from the index alone, or from the tagged
# rows), and only its rows get their tags and counts.
LISTED_PAGE = """
SELECT c.id FROM {source}
WHERE {archived} AND {pinned} AND {carries} AND (:all OR c.owner IS :owner)
ORDER BY c.pinned DESC, c.updated_at DESC, c.id DESC
LIMIT :limit OFFSET :offset"""
LISTED = """
SELECT c.id, c.title, c.updated_at,
    coalesce(h.depth + 1 - coalesce(r.role = 'system', 0), 0) AS message_count,
    c.owner, c.pinned, c.archived,
    (SELECT json_group_array(name) FROM (
        SELECT t.name FROM conversation_tags ct JOIN tags t ON t.id = ct.tag_id
        WHERE ct.conversation_id = c.id ORDER BY t.key)) AS tags
FROM ({page}) page
JOIN conversations c ON c.id = page.id
LEFT JOIN messages h INDEXED BY messages_place ON h.id = c.head_id
LEFT JOIN messages r INDEXED BY messages_place ON r.id = h.root_id
ORDER BY c.pinned DESC, c.updated_at DESC, c.id DESC"""
ARCHIVED = {False: "c.archived = 0", True: "c.archived = 1", None: "c.archived IN (0, 1)"}
PINNED = {False: "c.pinned IN (0, 1)", True: "c.pinned = 1"}


def _listing(source: str, carries: str = "1") -> dict:
    return {(kept, pinned): LISTED.format(page=LISTED_PAGE.format(
                source=source, archived=archived, pinned=only, carries=carries))
            for kept, archived in ARCHIVED.items() for pinned, only in PINNED.items()}


LIST_CONVERSATIONS = _listing("conversations c")
# With tags: started from the conversations carrying them all (chatdb/tags.py), or, for
# a page of a common tag, read in the index's order and each row checked until it is full.
LIST_TAGGED = _listing(f"({TAGGED}) tagged JOIN conversations c ON c.id = tagged.conversation_id")
LIST_TAGGED_IN_ORDER = _listing("conversations c", CARRIES_ALL)

RENAME_CONVERSATION = "UPDATE conversations SET title = :value, updated_at = :now WHERE id = :id"
SET_HEAD = "UPDATE conversations SET head_id = :value, updated_at = :now WHERE id = :id"
# The head moves to a turn's message only if it is still where the turn left it.
ADVANCE_HEAD = """
UPDATE conversations SET head_id = :new, updated_at = :now WHERE id = :id AND head_id IS :expected"""
HEADS_BACK = "UPDATE conversations SET head_id = :parent, updated_at = :now WHERE head_id = :id"
DELETE_LEAF = "DELETE FROM messages WHERE id = ? AND NOT EXISTS (SELECT 1 FROM messages WHERE parent_id = ?)"
TOUCH_CONVERSATION = "UPDATE conversations SET updated_at = :now WHERE id = :id"

INSERT_MESSAGE = """
INSERT INTO messages (uid, parent_id, root_id, conversation_id, depth, role, content, status,
                      created_at, meta)
VALUES (:uid, :parent_id, :root_id, :conversation_id, :depth, :role, :content, :status,
        :created_at, :meta)"""
ROOT_ITSELF = "UPDATE messages SET root_id = id WHERE id = ?"  # a new root is its own root
MESSAGE = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?"
CHILDREN = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE parent_id = ? ORDER BY id"
MESSAGE_EXISTS = "SELECT 1 FROM messages WHERE id = ?"
# Where a reply to the message goes: one deeper, in the same tree.
PLACE_UNDER = "SELECT depth + 1, root_id FROM messages WHERE id = ?"
MESSAGE_BY_UID = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE uid = ?"
COUNT_MESSAGES = "SELECT count(*) FROM messages"
# The messages written after an id: how many, and the newest (NULL: none).
WRITTEN_AFTER = "SELECT count(*), max(id) FROM messages WHERE id > ?"

# The walk from :message_id up to its root, one row (id, depth) per message
# on the way: every query that follows a path up the tree starts with it.
WALK_UP = """
WITH RECURSIVE up(id, depth) AS (
    SELECT id, depth FROM messages WHERE id = :message_id
    UNION ALL
    SELECT m.parent_id, up.depth - 1 FROM messages m JOIN up ON m.id = up.id
    WHERE m.parent_id IS NOT NULL
)"""
PATH = WALK_UP + f"""
SELECT {MESSAGE_COLUMNS} FROM messages WHERE id IN (SELECT id FROM up) ORDER BY depth"""

# What a conversation reaches: the messages it wrote, their ancestors, and the
# ancestors of its head (a fork writes nothing until it continues).
REACHED_BY = """
WITH RECURSIVE reached(id) AS (
    SELECT id FROM messages WHERE conversation_id = :conv
    UNION
    SELECT head_id FROM conversations WHERE id = :conv AND head_id IS NOT NULL
    UNION
    SELECT m.parent_id FROM messages m JOIN reached r ON m.id = r.id
    WHERE m.parent_id IS NOT NULL
)"""
CONVERSATION_TREE = REACHED_BY + f"""
SELECT {MESSAGE_COLUMNS} FROM messages WHERE id IN (SELECT id FROM reached) ORDER BY depth, id"""

INDEX_MESSAGE = "INSERT INTO messages_fts (rowid, body) VALUES (?, ?)"
