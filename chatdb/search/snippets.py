"""Each hit's snippet: the matched words marked, read per span of nearby hits."""

import json
import sqlite3

from .filters import spans
from .snippet_window import WindowSnippets, is_long
from .textindex import MARK_END, MARK_START, display_text

SNIPPET_TOKENS = 16
ELLIPSIS = "…"
SNIPPETS = """
SELECT rowid, snippet(messages_fts, 0, :start, :end, :ellipsis, :tokens) FROM messages_fts
WHERE messages_fts MATCH :match AND rowid BETWEEN :lo AND :hi
  AND rowid + 0 IN (SELECT value FROM json_each(:ids))"""
MARKS = {"start": MARK_START, "end": MARK_END, "ellipsis": ELLIPSIS, "tokens": SNIPPET_TOKENS}


def mark(snippet: str, start: str, end: str) -> str:
    """The snippet with its match marks replaced, e.g. by "**" and "**"."""
    return snippet.replace(MARK_START, start).replace(MARK_END, end)


def snippets_for(conn: sqlite3.Connection, match: str, ids: list[int]) -> dict[int, str]:
    """Each hit's snippet, CJK shown unspaced, whitespace made single spaces.

    Read per span of nearby hits, so far-apart hits cost a seek each, not
    a pass over every match between them; a long message's from a window
    around a match (snippet_window).
    """
    long = [message_id for message_id in ids if is_long(conn, message_id)]
    short = sorted(set(ids) - set(long))
    listed = json.dumps(short)
    found = {row[0]: row[1] for lo, hi in spans(short)
             for row in conn.execute(SNIPPETS, {"match": match, "lo": lo, "hi": hi,
                                                "ids": listed, **MARKS})}
    if long:
        windows = WindowSnippets(match, MARKS)
        try:
            found.update((message_id, windows.snippet(conn, message_id)) for message_id in long)
        finally:
            windows.close()
    return {message_id: " ".join(display_text(text).split()) for message_id, text in found.items()}
