"""Deleting a conversation: remove what only it reaches, keep what forks share."""

import sqlite3

from .queries import REACHED_BY

MAKE_DOOMED = "CREATE TEMP TABLE IF NOT EXISTS doomed (id INTEGER PRIMARY KEY)"
CLEAR_DOOMED = "DELETE FROM doomed"

# Candidates: what the conversation reaches, and messages no conversation
# owns any more (left by a deleted conversation because a fork reached them,
# and no longer reached if that fork's head has since moved elsewhere).
# A candidate lives on if another conversation wrote it, has it as head, or
# continues below it: every message outside the candidates was written by a
# live conversation.
FIND_DOOMED = REACHED_BY + """,
candidate(id) AS (
    SELECT id FROM reached
    UNION
    SELECT id FROM messages WHERE conversation_id IS NULL
),
anchor(id) AS (
    SELECT id FROM messages
    WHERE id IN (SELECT id FROM candidate) AND conversation_id IS NOT :conv
      AND conversation_id IS NOT NULL
    UNION
    SELECT head_id FROM conversations
    WHERE id != :conv AND head_id IN (SELECT id FROM candidate)
    UNION
    SELECT parent_id FROM messages
    WHERE parent_id IN (SELECT id FROM candidate) AND id NOT IN (SELECT id FROM candidate)
),
live(id) AS (
    SELECT id FROM anchor
    UNION
    SELECT m.parent_id FROM messages m JOIN live l ON m.id = l.id WHERE m.parent_id IS NOT NULL
)
INSERT INTO doomed (id)
SELECT id FROM candidate WHERE id NOT IN (SELECT id FROM live)"""

DELETE_CONVERSATION = "DELETE FROM conversations WHERE id = ?"
# Tokens and KV go by ON DELETE CASCADE, index entries by trigger.
DELETE_DOOMED = "DELETE FROM messages WHERE id IN (SELECT id FROM doomed)"


def delete_conversation(conn: sqlite3.Connection, conv_id: int) -> int:
    """Inside the caller's transaction; returns the number of messages removed."""
    conn.execute(MAKE_DOOMED)
    conn.execute(CLEAR_DOOMED)
    conn.execute(FIND_DOOMED, {"conv": conv_id})
    conn.execute(DELETE_CONVERSATION, (conv_id,))
    removed = conn.execute(DELETE_DOOMED).rowcount
    conn.execute(CLEAR_DOOMED)
    return removed
