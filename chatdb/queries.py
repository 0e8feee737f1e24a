"""Named SQL for conversations and messages. Parameters are always bound."""

CONVERSATION_COLUMNS = "id, uid, title, head_id, system_prompt, model, created_at, updated_at, meta"
MESSAGE_COLUMNS = "id, uid, parent_id, conversation_id, depth, role, content, status, created_at, meta"

INSERT_CONVERSATION = """
INSERT INTO conversations (uid, title, head_id, system_prompt, model, created_at, updated_at, meta)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)"""

CONVERSATION = f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ?"
CONVERSATION_BY_UID = f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE uid = ?"
LATEST_CONVERSATION = f"""
SELECT {CONVERSATION_COLUMNS} FROM conversations ORDER BY updated_at DESC, id DESC LIMIT 1"""
COUNT_CONVERSATIONS = "SELECT count(*) FROM conversations"

# message_count is the head's depth + 1: no walk over the path.
LIST_CONVERSATIONS = """
SELECT c.id, c.title, c.updated_at, coalesce(m.depth + 1, 0) AS message_count
FROM conversations c LEFT JOIN messages m ON m.id = c.head_id
ORDER BY c.updated_at DESC, c.id DESC
LIMIT ? OFFSET ?"""

RENAME_CONVERSATION = "UPDATE conversations SET title = :value, updated_at = :now WHERE id = :id"
SET_SYSTEM_PROMPT = "UPDATE conversations SET system_prompt = :value, updated_at = :now WHERE id = :id"
SET_HEAD = "UPDATE conversations SET head_id = :value, updated_at = :now WHERE id = :id"
TOUCH_CONVERSATION = "UPDATE conversations SET updated_at = :now WHERE id = :id"

INSERT_MESSAGE = """
INSERT INTO messages (uid, parent_id, conversation_id, depth, role, content, status, created_at, meta)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"""
MESSAGE = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?"
MESSAGE_EXISTS = "SELECT 1 FROM messages WHERE id = ?"
MESSAGE_BY_UID = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE uid = ?"
COUNT_MESSAGES = "SELECT count(*) FROM messages"

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
