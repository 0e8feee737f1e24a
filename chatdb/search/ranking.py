"""Which matches are the best: bm25 over the newest candidates, filters checked on the best.

- Messages are picked from the index alone, newest first (rowid order),
  without reading the messages table. It is read for the best ones only,
  and the role and date filters are checked on those; only when too few
  pass are the filters checked on every match.
- bm25 scores every row it ranks, and a common word matches most of the
  archive: when more than CANDIDATES messages match, only the newest
  CANDIDATES are ranked.
"""

import bisect
import json
import sqlite3

from .filters import MESSAGE_FILTERS, Filters, search_ranges
from .query import scoring_expression

CANDIDATES = 1000  # most messages ranked per search
# ...within tagged conversations, whose messages are spread thin across the index: the
# newest matches read to find each candidate are about 1 / the tag's share (100 at 1%).
TAGGED_CANDIDATES = 200
MAX_TIES = 200  # most equal-scored messages ordered by created_at at the cut
MAX_READS = 16  # most matches read per candidate still wanted, in one batch

# `rowid + 0 IN (...)` is a filter on rows read in rowid order: a plain
# `rowid IN` would make FTS5 run the whole query once per listed id. A match's
# writer is read from an index (migration 0019), not the row with its text.
MATCHING_IDS = """
SELECT rowid FROM messages_fts
WHERE messages_fts MATCH :match AND rowid BETWEEN :lo AND :hi
  AND (:reached IS NULL OR rowid + 0 IN (SELECT value FROM json_each(:reached)))
  AND (:convs IS NULL OR rowid + 0 IN (SELECT value FROM json_each(:fork_starts))
       OR (SELECT m.conversation_id FROM messages m INDEXED BY messages_place
           WHERE m.id = messages_fts.rowid) IN (SELECT value FROM json_each(:convs)))
ORDER BY rowid DESC
LIMIT :limit"""
PASSING_IDS = """
SELECT m.id FROM messages m WHERE m.id IN (SELECT value FROM json_each(:ids))""" + MESSAGE_FILTERS

SCORES = """
SELECT rowid, bm25(messages_fts) FROM messages_fts
WHERE messages_fts MATCH :match AND rowid BETWEEN :lo AND :hi
  AND rowid + 0 IN (SELECT value FROM json_each(:ids))"""

HIT_ROWS = """
SELECT m.id, m.conversation_id, m.role, m.created_at, c.title
FROM messages m LEFT JOIN conversations c ON c.id = m.conversation_id
WHERE m.id IN (SELECT value FROM json_each(:ids))""" + MESSAGE_FILTERS


def best_matches(conn: sqlite3.Connection, match: str, filters: Filters,
                 limit: int) -> tuple[list[sqlite3.Row], dict[int, float]]:
    """The rows of the best `limit` matches, and the candidates' scores.

    The role and date filters are first checked on the best of the newest
    matches only; when fewer than `limit` of those pass and older matches
    exist, on every match from the newest back.
    """
    wanted = max(TAGGED_CANDIDATES if filters.tagged else CANDIDATES, limit)
    found = candidates(conn, match, filters, wanted, check_messages=False)
    scores = rank(conn, match, found)
    rows = best_rows(conn, found, scores, limit, filters)
    if len(rows) < limit and len(found) == wanted and filters.on_messages:
        found = candidates(conn, match, filters, wanted, check_messages=True)
        scores = rank(conn, match, found)
        rows = best_rows(conn, found, scores, limit, filters)
    return rows, scores


def candidates(conn: sqlite3.Connection, match: str, filters: Filters, wanted: int,
               check_messages: bool) -> list[int]:
    """Ids of the newest matches in the filters' ranges, at most `wanted`.

    With check_messages, only those whose role and date pass.
    """
    check_messages = check_messages and filters.on_messages
    convs = None if filters.conversations is None else json.dumps(filters.conversations)
    fork_starts = json.dumps(list(filters.fork_starts))
    found: list[int] = []
    reads = 1  # batches grow while the role or date filter rejects most matches
    for lo, hi in search_ranges(conn, filters):
        while len(found) < wanted and lo <= hi:
            batch = (wanted - len(found)) * reads
            ids = [row[0] for row in conn.execute(MATCHING_IDS, {
                "match": match, "lo": lo, "hi": hi, "reached": _within(filters.reached, lo, hi),
                "convs": convs,
                "fork_starts": fork_starts, "limit": batch})]
            found += passing(conn, ids, filters) if check_messages else ids
            if len(ids) < batch:
                break
            hi = ids[-1] - 1
            reads = min(reads * 2, MAX_READS)
    return found[:wanted]


def _within(reached: "list[int] | None", lo: int, hi: int) -> "str | None":
    """The allowed ids from lo to hi, as the JSON a statement reads (None: any). Only
    those: SQLite builds its IN list anew at each statement, and a tag may reach 10,000
    messages over several ranges and batches (3 ms each time, all of them)."""
    if reached is None:
        return None
    return json.dumps(reached[bisect.bisect_left(reached, lo):bisect.bisect_right(reached, hi)])


def passing(conn: sqlite3.Connection, ids: list[int], filters: Filters) -> list[int]:
    """Those of `ids` (newest first) whose role and date pass the filters, in order."""
    kept = {row[0] for row in conn.execute(PASSING_IDS, {
        "ids": json.dumps(ids), "role": filters.role, "since": filters.since,
        "until": filters.until})}
    return [i for i in ids if i in kept]


def rank(conn: sqlite3.Connection, match: str, found: list[int]) -> dict[int, float]:
    """bm25 of each candidate; {} when no phrase is rare enough to score.

    One statement: FTS5 counts each phrase's messages anew in every one.
    """
    scoring = scoring_expression(conn, match) if found else None
    if scoring is None:
        return {}
    ids = sorted(found)
    return {row[0]: row[1] for row in conn.execute(SCORES, {
        "match": scoring, "lo": ids[0], "hi": ids[-1], "ids": json.dumps(ids)})}


def best_rows(conn: sqlite3.Connection, found: list[int], scores: dict[int, float],
              limit: int, filters: Filters) -> list[sqlite3.Row]:
    """The message rows of the best `limit` candidates that pass the role and
    date filters, newer first on equal scores.

    Rowid order stands in for age until the cut; the rows tied at the cut
    (at most MAX_TIES more) are read and ordered by created_at.
    """
    ranked = sorted(found, key=lambda i: (scores.get(i, 0.0), -i))
    rows, start, step = [], 0, limit
    while len(rows) < limit and start < len(ranked):
        rows += message_rows(conn, ranked[start:start + step], filters)
        start, step = start + step, step * 4
    if rows:
        rows.sort(key=lambda row: (scores.get(row[0], 0.0), -row[0]))
        cut = scores.get(rows[min(limit, len(rows)) - 1][0], 0.0)
        rows += message_rows(conn, [i for i in ranked[start:start + MAX_TIES]
                                    if scores.get(i, 0.0) == cut], filters)
    rows.sort(key=lambda row: (row[3], row[0]), reverse=True)
    rows.sort(key=lambda row: scores.get(row[0], 0.0))
    return rows[:limit]


def message_rows(conn: sqlite3.Connection, ids: list[int], filters: Filters) -> list[sqlite3.Row]:
    if not ids:
        return []
    return conn.execute(HIT_ROWS, {"ids": json.dumps(ids), "role": filters.role,
                                   "since": filters.since, "until": filters.until}).fetchall()
