"""Stored answers' token arrays as a drafter reads them: new ones in id order, the ones
gone since, a window of one, and the answers related to a message being answered.

The archive drafter (engine/decode/archive_drafter.py) guesses an answer from
answers written before: its question's other answers (a retry), the answers
to the question's siblings (an edit), the conversation's other answers, then
any answer of the archive in the same tokenizer. Only token arrays are read,
never text: nothing is tokenized again.
"""

import sqlite3

import numpy as np

from .queries import REACHED_BY
from .tokens import TOKEN_DTYPE, unpack

# Answers (assistant messages) with tokens in this tokenizer, after :after, in id order.
ANSWERS_AFTER = """
SELECT t.message_id, t.tokens FROM message_tokens t JOIN messages m ON m.id = t.message_id
WHERE t.tokenizer_id = :tokenizer AND t.message_id > :after AND m.role = 'assistant'
ORDER BY t.message_id LIMIT :limit"""
# Arrays to read after :after (any role: a bound on what indexing them costs, cheaply).
COUNT_AFTER = """
SELECT count(*) FROM message_tokens WHERE tokenizer_id = :tokenizer AND message_id > :after"""
DELETED_AFTER = """
SELECT id, message_id FROM message_tokens_deleted
WHERE id > :after AND tokenizer_id = :tokenizer ORDER BY id"""
DELETION_LOG = "SELECT coalesce(min(id), 1) - 1, coalesce(max(id), 0) FROM message_tokens_deleted"
PRUNE_LOG = "DELETE FROM message_tokens_deleted WHERE id <= ?"
# Bytes are 1-based in substr; a blob's substr is bytes, so this reads a window only.
WINDOW = """
SELECT substr(tokens, :start * 4 + 1, :count * 4) FROM message_tokens
WHERE message_id = :message_id AND tokenizer_id = :tokenizer"""

# The answers nearest a message: its own children (other answers to the same
# question), then its siblings' children (answers to an earlier version of it;
# for a first message, the conversation's other first messages), newest first
# within each.
RELATED_ANSWERS = """
WITH me AS (SELECT id, parent_id, role, conversation_id FROM messages WHERE id = :message_id),
versions(id) AS (
    SELECT q.id FROM me CROSS JOIN messages q WHERE q.parent_id = me.parent_id
    UNION ALL   -- roots are siblings within one conversation only (CROSS JOIN: me first)
    SELECT q.id FROM me CROSS JOIN messages q
    WHERE me.parent_id IS NULL AND q.conversation_id = me.conversation_id AND q.parent_id IS NULL
)
SELECT a.id, 0 AS tier FROM messages a WHERE a.parent_id = :message_id AND a.role = 'assistant'
UNION ALL
SELECT a.id, 1 FROM versions v JOIN messages q ON q.id = v.id JOIN messages a ON a.parent_id = q.id
WHERE q.id != :message_id AND q.role = (SELECT role FROM me) AND a.role = 'assistant'
ORDER BY tier, id DESC LIMIT :limit"""
# Every answer the conversation reaches, newest first.
CONVERSATION_ANSWERS = REACHED_BY + """
SELECT id FROM messages WHERE id IN (SELECT id FROM reached) AND role = 'assistant'
ORDER BY id DESC LIMIT :limit"""
TOKENS_OF = """
SELECT substr(tokens, 1, :count * 4) FROM message_tokens
WHERE message_id = :message_id AND tokenizer_id = :tokenizer"""

LOG_KEEP = 100_000   # rows of the deletion log kept for indexes that look rarely


class TokenSources:
    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def answers_after(self, tokenizer: str, after: int, limit: int) -> list:
        """(message id, tokens as bytes) of up to `limit` answers after id `after`."""
        return self.conn.execute(ANSWERS_AFTER, {"tokenizer": tokenizer, "after": after,
                                                 "limit": limit}).fetchall()

    def count_after(self, tokenizer: str, after: int) -> int:
        return self.conn.execute(COUNT_AFTER, {"tokenizer": tokenizer, "after": after}).fetchone()[0]

    def deletion_log(self) -> "tuple[int, int]":
        """(the last log row pruned, the newest row): an index that saw less than the first
        has missed deletions."""
        return tuple(self.conn.execute(DELETION_LOG).fetchone())

    def deleted_after(self, tokenizer: str, after: int) -> list:
        """(log row, message id) of this tokenizer's arrays deleted after log row `after`."""
        return self.conn.execute(DELETED_AFTER, {"tokenizer": tokenizer, "after": after}).fetchall()

    def prune_log(self) -> None:
        """Keep the newest LOG_KEEP rows of the deletion log (the caller's transaction)."""
        _, newest = self.deletion_log()
        if newest > LOG_KEEP:
            self.conn.execute(PRUNE_LOG, (newest - LOG_KEEP,))

    def window(self, message_id: int, tokenizer: str, start: int, count: int) -> np.ndarray:
        """Tokens [start, start + count) of a stored array (fewer at its end; none if gone)."""
        row = self.conn.execute(WINDOW, {"message_id": message_id, "tokenizer": tokenizer,
                                         "start": start, "count": count}).fetchone()
        return unpack(row[0]) if row and row[0] else np.zeros(0, TOKEN_DTYPE)

    def related(self, message_id: int, conversation_id: "int | None", tokenizer: str,
                limit: int, most_tokens: int) -> "list[tuple[int, np.ndarray]]":
        """(message id, tokens, tier) of the answers nearest `message_id` (RELATED_ANSWERS:
        tier 0 its answers, 1 its earlier versions'), then the conversation's other answers
        (tier 2); each once, at most `limit`, each cut at `most_tokens`."""
        ids = list(self.conn.execute(RELATED_ANSWERS, {"message_id": message_id, "limit": limit}))
        if conversation_id is not None:
            ids += [(mid, 2) for (mid,) in self.conn.execute(
                CONVERSATION_ANSWERS, {"conv": conversation_id, "limit": limit})]
        found, seen = [], set()
        for mid, tier in ids:
            if mid in seen or len(found) >= limit:
                continue
            seen.add(mid)
            row = self.conn.execute(TOKENS_OF, {"message_id": mid, "tokenizer": tokenizer,
                                                "count": most_tokens}).fetchone()
            if row is not None and row[0]:
                found.append((mid, unpack(row[0]), tier))
        return found
