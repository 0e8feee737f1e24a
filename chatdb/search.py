"""Full-text search over every message in the archive (SQLite FTS5).

    for hit in search(conn, "borrow checker", role="assistant", since="2026-11-01"):
        print(hit.title, mark(hit.snippet, "[", "]"))

Hits are ranked by bm25 (lower is better), newer first among equal scores.
A query in FTS5 syntax works as such ("a phrase", prefix*, OR, NOT,
NEAR(...)); text that is not valid syntax is searched as plain words. CJK
text matches by substring (see textindex).

What keeps a search fast however large the archive:
- Messages are picked from the index alone, newest first (rowid order),
  without reading the messages table. It is read for the best ones only,
  and the role and date filters are checked on those; only when too few
  pass are the filters checked on every match.
- bm25 scores every row it ranks, and a common word matches most of the
  archive: when more than CANDIDATES messages match, only the newest
  CANDIDATES are ranked.
- To learn a phrase's idf, FTS5 counts every message that contains it, in
  every search: 20-30 ms for "the" in a million messages. In an archive of
  EXACT_BELOW messages or more, a phrase in more than half of them (whose
  idf FTS5 floors at 1e-6 anyway) or in more than MAX_COUNTED (idf below
  2.3 at a million) still selects messages but is left out of the score.
- Snippets come from a pass over each run of nearby hits, not from one
  index lookup per hit.
- FTS5's time grows with the square of a query's phrases: a phrase said
  twice is searched once, and a query of more than MAX_TERMS words (a
  pasted page) is refused.
"""

import json
import sqlite3
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

from . import queries as q
from .archive import ROLES
from .clock import to_iso
from .errors import ChatdbError, NotFound
from .textindex import (MARK_END, MARK_START, QUERY_TOKEN, and_phrases, display_text, plain_query,
                        query_text)
from .transaction import read_snapshot

__all__ = ["Hit", "MARK_END", "MARK_START", "SearchError", "mark", "search"]

CANDIDATES = 1000  # most messages ranked per search
MAX_TIES = 200  # most equal-scored messages ordered by created_at at the cut
SNIPPET_TOKENS = 16
ELLIPSIS = "…"
COMMON_SAMPLE = 1000  # newest rowids in which a phrase's share is measured
EXACT_BELOW = 20_000  # archives this small are ranked with every phrase
MAX_COUNTED = 100_000  # a phrase in more messages is left out of the score (~3 ms to count)
SPAN_GAP = 1000  # filtered ids further apart than this are read as separate ranges
MAX_SPANS = 8
MAX_READS = 16  # most matches read per candidate still wanted, in one batch
LAST_ROWID = 2**63 - 1
MAX_TERMS = 256  # words and operators in one query (a pasted page is not a query)


@dataclass(frozen=True)
class Hit:
    conversation_id: "int | None"  # the writer, else a conversation that reaches the message
    message_id: int
    role: str
    snippet: str  # matches between MARK_START and MARK_END
    title: str
    created_at: str
    score: float  # bm25 (of the phrases scored, see above): lower is better


class SearchError(ChatdbError):
    """Arguments no search can honour (a bad date, since after until)."""


@dataclass(frozen=True)
class Filters:
    role: "str | None"
    since: "str | None"  # created_at >= since
    until: "str | None"  # created_at < until
    reached: "list[int] | None"  # ids a conversation reaches, ascending

    @property
    def on_messages(self) -> bool:
        """Whether a match must be looked up in the messages table."""
        return any(f is not None for f in (self.role, self.since, self.until))


# Parsing is what a bad query fails at; rowid 0 is never a message.
VALIDATE = "SELECT 1 FROM messages_fts WHERE messages_fts MATCH ? AND rowid = 0"

# `rowid + 0 IN (...)` is a filter on rows read in rowid order: a plain
# `rowid IN` would make FTS5 run the whole query once per listed id.
MATCHING_IDS = """
SELECT rowid FROM messages_fts
WHERE messages_fts MATCH :match AND rowid BETWEEN :lo AND :hi
  AND (:reached IS NULL OR rowid + 0 IN (SELECT value FROM json_each(:reached)))
ORDER BY rowid DESC
LIMIT :limit"""
MESSAGE_FILTERS = """
  AND (:role IS NULL OR m.role = :role)
  AND (:since IS NULL OR m.created_at >= :since)
  AND (:until IS NULL OR m.created_at < :until)"""
PASSING_IDS = """
SELECT m.id FROM messages m WHERE m.id IN (SELECT value FROM json_each(:ids))""" + MESSAGE_FILTERS

SCORES = """
SELECT rowid, bm25(messages_fts) FROM messages_fts
WHERE messages_fts MATCH :match AND rowid BETWEEN :lo AND :hi
  AND rowid + 0 IN (SELECT value FROM json_each(:ids))"""
NEWEST_ID = "SELECT max(id) FROM messages"
PHRASE_COUNT_FROM = "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ? AND rowid > ?"

HIT_ROWS = """
SELECT m.id, m.conversation_id, m.role, m.created_at, c.title
FROM messages m LEFT JOIN conversations c ON c.id = m.conversation_id
WHERE m.id IN (SELECT value FROM json_each(:ids))""" + MESSAGE_FILTERS
SNIPPETS = """
SELECT rowid, snippet(messages_fts, 0, :start, :end, :ellipsis, :tokens) FROM messages_fts
WHERE messages_fts MATCH :match AND rowid BETWEEN :lo AND :hi
  AND rowid + 0 IN (SELECT value FROM json_each(:ids))"""

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
REACHED_IDS = q.REACHED_BY + "\nSELECT id FROM reached ORDER BY id"

# Bounding dates by rowid needs an index on created_at; without one the
# date filter is checked on each match instead.
HAS_DATE_INDEX = """
SELECT 1 FROM pragma_index_list('messages') l JOIN pragma_index_info(l.name) i
WHERE i.seqno = 0 AND i.name = 'created_at'"""
DATE_RANGE_IDS = """
SELECT min(id), max(id) FROM messages WHERE created_at >= :since AND created_at < :until"""
NO_SINCE, NO_UNTIL = "", "~"  # before and after every ISO 8601 time


def search(conn: sqlite3.Connection, query: str, *, limit: int = 20,
           conversation_id: "int | None" = None, role: "str | None" = None,
           since: "str | None" = None, until: "str | None" = None) -> list[Hit]:
    """The best `limit` messages for `query`, best first; [] for a blank query.

    since/until: ISO 8601 times or dates, UTC unless they say otherwise; a
    date as `until` includes that whole day. Raises SearchError for
    impossible arguments and NotFound for a conversation that does not
    exist; never for the query's syntax.
    """
    with read_snapshot(conn):
        filters = make_filters(conn, limit, conversation_id, role, since, until)
        match = match_expression(conn, query)
        if match is None:
            return []
        rows, scores = best_matches(conn, match, filters, limit)
        if not rows:
            return []
        snippets = snippets_for(conn, match, [row[0] for row in rows])
        return [make_hit(conn, row, snippets[row[0]], scores.get(row[0], 0.0), conversation_id)
                for row in rows]


def mark(snippet: str, start: str, end: str) -> str:
    """The snippet with its match marks replaced, e.g. by "**" and "**"."""
    return snippet.replace(MARK_START, start).replace(MARK_END, end)


# -- the query -----------------------------------------------------------------

def match_expression(conn: sqlite3.Connection, query: str) -> "str | None":
    """The FTS5 expression to run: the query as syntax if valid, else its words."""
    if not query or not query.strip():
        return None
    expression = _without_repeats(query_text(query))
    if _terms(expression) <= MAX_TERMS:
        try:
            conn.execute(VALIDATE, (expression,)).fetchall()
            return expression
        except sqlite3.OperationalError:  # fts5: syntax error, no such column, ...
            pass
    expression = plain_query(query)
    expression = expression and _without_repeats(expression)
    if expression is not None and (terms := _terms(expression)) > MAX_TERMS:
        raise SearchError(f"the query has {terms:,} different words; at most {MAX_TERMS} "
                          "are searched at once")
    return expression


def _terms(expression: str) -> int:
    return sum(1 for token in QUERY_TOKEN.findall(expression) if not token.isspace())


def _without_repeats(expression: str) -> str:
    """A plain AND of phrases with each phrase once: FTS5's time grows with the
    square of the phrases, and a repeated one selects nothing more."""
    phrases = and_phrases(expression)
    return " ".join(dict.fromkeys(phrases)) if phrases else expression


def scoring_expression(conn: sqlite3.Connection, match: str) -> "str | None":
    """`match` without its common phrases, which FTS5 would count in full.

    A phrase is common in more than half the newest COMMON_SAMPLE messages
    (its idf is floored anyway), or when it is in more than MAX_COUNTED
    messages by that share. None when every phrase is common: all scores
    are then 0 and recency alone orders the hits. Only a plain AND of
    phrases can lose one; small archives keep every phrase.
    """
    phrases = and_phrases(match)
    newest = conn.execute(NEWEST_ID).fetchone()[0] or 0
    if not phrases or newest < EXACT_BELOW:
        return match
    since_id = newest - COMMON_SAMPLE
    most = min(COMMON_SAMPLE / 2, COMMON_SAMPLE * MAX_COUNTED / newest)
    kept = [phrase for phrase in phrases
            if conn.execute(PHRASE_COUNT_FROM, (phrase, since_id)).fetchone()[0] <= most]
    return " ".join(kept) if kept else None


# -- filters -------------------------------------------------------------------

def make_filters(conn, limit, conversation_id, role, since, until) -> Filters:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise SearchError(f"limit must be a positive whole number, not {limit!r}")
    if role is not None and role not in ROLES:
        raise SearchError(f"unknown role {role!r} (expected one of {', '.join(ROLES)})")
    start = instant(since, "since") if since else None
    end = instant(until, "until") if until else None
    if start and end and start >= end:
        raise SearchError(f"since ({since}) is not before until ({until})")
    reached = None
    if conversation_id is not None:
        if conn.execute(q.CONVERSATION, (conversation_id,)).fetchone() is None:
            raise NotFound(f"no conversation {conversation_id}")
        reached = [row[0] for row in conn.execute(REACHED_IDS, {"conv": conversation_id})]
    return Filters(role, start, end, reached)


def instant(value: str, name: str) -> str:
    """An ISO 8601 time or date as created_at text; as `until`, the end of it."""
    moment, length = parse_time(value.strip())
    if moment is None:
        raise SearchError(f"{name}: {value!r} is not an ISO 8601 date or time")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        return to_iso(moment + length if name == "until" else moment)
    except OverflowError:
        raise SearchError(f"{name}: {value!r} is out of range") from None


def parse_time(text: str) -> tuple["datetime | None", timedelta]:
    """A date (the whole day) or a time (its millisecond: created_at's unit)."""
    try:
        day = date.fromisoformat(text)
        return datetime(day.year, day.month, day.day), timedelta(days=1)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
        return moment, timedelta(milliseconds=1)
    except ValueError:
        return None, timedelta(0)


def search_ranges(conn: sqlite3.Connection, filters: Filters) -> list[tuple[int, int]]:
    """Rowid ranges that hold every message the filters allow, newest first."""
    lo, hi = 0, LAST_ROWID
    if (filters.since or filters.until) and conn.execute(HAS_DATE_INDEX).fetchone():
        first, last = conn.execute(DATE_RANGE_IDS, {
            "since": filters.since or NO_SINCE, "until": filters.until or NO_UNTIL}).fetchone()
        if first is None:
            return []
        lo, hi = first, last
    if filters.reached is None:
        return [(lo, hi)]
    clipped = [(max(a, lo), min(b, hi)) for a, b in spans(filters.reached)]
    return [(a, b) for a, b in clipped if a <= b]


def spans(ids: list[int]) -> list[tuple[int, int]]:
    """Ascending ids as at most MAX_SPANS ranges, cut at the widest gaps, newest first."""
    if not ids:
        return []
    gaps = sorted((ids[i + 1] - ids[i], i) for i in range(len(ids) - 1)
                  if ids[i + 1] - ids[i] > SPAN_GAP)
    cuts = sorted(i for _, i in gaps[max(0, len(gaps) - (MAX_SPANS - 1)):])
    ranges, start = [], 0
    for cut in cuts:
        ranges.append((ids[start], ids[cut]))
        start = cut + 1
    ranges.append((ids[start], ids[-1]))
    return ranges[::-1]


# -- ranking -------------------------------------------------------------------

def best_matches(conn: sqlite3.Connection, match: str, filters: Filters,
                 limit: int) -> tuple[list[sqlite3.Row], dict[int, float]]:
    """The rows of the best `limit` matches, and the candidates' scores.

    The role and date filters are first checked on the best of the newest
    matches only; when fewer than `limit` of those pass and older matches
    exist, on every match from the newest back.
    """
    wanted = max(CANDIDATES, limit)
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
    reached = None if filters.reached is None else json.dumps(filters.reached)
    found: list[int] = []
    reads = 1  # batches grow while the role or date filter rejects most matches
    for lo, hi in search_ranges(conn, filters):
        while len(found) < wanted and lo <= hi:
            batch = (wanted - len(found)) * reads
            ids = [row[0] for row in conn.execute(MATCHING_IDS, {
                "match": match, "lo": lo, "hi": hi, "reached": reached, "limit": batch})]
            found += passing(conn, ids, filters) if check_messages else ids
            if len(ids) < batch:
                break
            hi = ids[-1] - 1
            reads = min(reads * 2, MAX_READS)
    return found[:wanted]


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


# -- hits ----------------------------------------------------------------------

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
