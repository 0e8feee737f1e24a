"""Each hit's snippet: the matched words marked, read per span of nearby hits."""

import json
import sqlite3

from .filters import spans
from .textindex import MARK_END, MARK_START, display_text

SNIPPET_TOKENS = 16
ELLIPSIS = "…"
SNIPPETS = """
SELECT rowid, snippet(messages_fts, 0, :start, :end, :ellipsis, :tokens) FROM messages_fts
WHERE messages_fts MATCH :match AND rowid BETWEEN :lo AND :hi
  AND rowid + 0 IN (SELECT value FROM json_each(:ids))"""


def mark(snippet: str, start: str, end: str) -> str:
    """The snippet with its match marks replaced, e.g. by "**" and "**"."""
    return snippet.replace(MARK_START, start).replace(MARK_END, end)


def snippets_for(conn: sqlite3.Connection, match: str, ids: list[int]) -> dict[int, str]:
    """Each hit's snippet, CJK shown unspaced, whitespace made single spaces.

    Read per span of nearby hits, so far-apart hits cost a seek each, not
    a pass over every match between them.
    """
    ordered = sorted(ids)
    listed = json.dumps(ordered)
    return {row[0]: " ".join(display_text(row[1]).split()) for lo, hi in spans(ordered)
            for row in conn.execute(SNIPPETS, {
                "match": match, "lo": lo, "hi": hi, "ids": listed, "start": MARK_START,
                "end": MARK_END, "ellipsis": ELLIPSIS, "tokens": SNIPPET_TOKENS})}
