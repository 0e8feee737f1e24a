"""Full-text search over every message in the archive (SQLite FTS5).

    for hit in search(conn, "borrow checker", role="assistant", since="2026-11-01"):
        print(hit.title, mark(hit.snippet, "[", "]"))

Hits are ranked by bm25 (lower is better), newer first among equal scores.
A query in FTS5 syntax works as such ("a phrase", prefix*, OR, NOT,
NEAR(...)); text that is not valid syntax is searched as plain words. CJK
text matches by substring (see textindex).

What keeps a search fast however large the archive, each said where it is
done: messages are picked from the index alone and only the newest
CANDIDATES matches are ranked (ranking.py); common phrases select but are
not scored, repeated ones are searched once, and a pasted page is refused
(query.py); the filters become rowid ranges (filters.py); snippets come from
a pass over each run of nearby hits (snippets.py), a long message's from a
window around a match (snippet_window.py); the index is kept in few
segments (index_upkeep.py). Ctrl-C stops a search at once (chatdb.storage.interrupt).
"""

import sqlite3
from dataclasses import dataclass

from ..errors import SearchError
from ..storage.interrupt import interruptible
from ..storage.transaction import read_snapshot
from .filters import make_filters
from .query import match_expression
from .ranking import best_matches
from .snippets import mark, snippets_for
from .tag_terms import split_tags
from .textindex import MARK_END, MARK_START

__all__ = ["Hit", "MARK_END", "MARK_START", "SearchError", "mark", "search"]


@dataclass(frozen=True)
class Hit:
    conversation_id: "int | None"  # the writer, else a conversation that reaches the message
    message_id: int
    role: str
    snippet: str  # matches between MARK_START and MARK_END
    title: str
    created_at: str
    score: float  # bm25 (of the phrases scored, see above): lower is better


# A message whose writer is gone is reached by a conversation that wrote a
# message below it or has its head there; the walk stops at written messages.
REACHING_CONVERSATION = """
WITH RECURSIVE below(id, writer) AS (
    SELECT id, conversation_id FROM messages WHERE id = :id
    UNION ALL
    SELECT m.id, m.conversation_id FROM messages m JOIN below b ON m.parent_id = b.id
    WHERE b.writer IS NULL
)
SELECT coalesce(b.writer, c.id), coalesce(w.title, c.title)
FROM below b
LEFT JOIN conversations w ON w.id = b.writer
LEFT JOIN conversations c ON c.head_id = b.id
WHERE b.writer IS NOT NULL OR c.id IS NOT NULL
LIMIT 1"""
CONVERSATION_TITLE = "SELECT title FROM conversations WHERE id = ?"


def search(conn: sqlite3.Connection, query: str, *, limit: int = 20,
           conversation_id: "int | None" = None, role: "str | None" = None,
           since: "str | None" = None, until: "str | None" = None, tags=(),
           owner: "str | None" = None) -> list[Hit]:
    """The best `limit` messages for `query`, best first; [] for a blank query.

    tags (and `tag:NAME` in the query): only in what the conversations carrying
    all of them reach.

    since/until: ISO 8601 times or dates, UTC unless they say otherwise; a
    date as `until` includes that whole day. Raises SearchError for
    impossible arguments and NotFound for a conversation that does not
    exist; never for the query's syntax.
    """
    query, named = split_tags(query)
    with interruptible(conn), read_snapshot(conn):
        filters = make_filters(conn, limit, conversation_id, role, since, until, [*tags, *named], owner)
        match = match_expression(conn, query)
        if match is None:
            return []
        rows, scores = best_matches(conn, match, filters, limit)
        if not rows:
            return []
        snippets = snippets_for(conn, match, [row[0] for row in rows])
        return [make_hit(conn, row, snippets[row[0]], scores.get(row[0], 0.0), conversation_id)
                for row in rows]


def make_hit(conn: sqlite3.Connection, row: sqlite3.Row, snippet: str, score: float,
             conversation_id: "int | None") -> Hit:
    message_id, owner, role, created_at, title = tuple(row)
    if owner is None:  # its writer was deleted; a fork still reaches it
        owner, title = reaching_conversation(conn, message_id, conversation_id)
    return Hit(conversation_id=owner, message_id=message_id, role=role, snippet=snippet,
               title=title or "", created_at=created_at, score=score)


def reaching_conversation(conn: sqlite3.Connection, message_id: int,
                          conversation_id: "int | None") -> tuple["int | None", str]:
    """A conversation that reaches the message, and its title: the filter's if any."""
    if conversation_id is not None:
        return conversation_id, conn.execute(CONVERSATION_TITLE, (conversation_id,)).fetchone()[0]
    row = conn.execute(REACHING_CONVERSATION, {"id": message_id}).fetchone()
    return (row[0], row[1]) if row else (None, "")
