"""What a search is limited to: a role, a time range, what one conversation (or one user's
conversations) reaches.

The filters become rowid ranges that the index is read in (newest first),
and a condition checked on the messages table for the matches read.
"""

import sqlite3
from dataclasses import dataclass

from .. import queries as q
from ..errors import NotFound, SearchError
from ..records import ROLES
from ..tags import Tags
from .dates import instant

SPAN_GAP = 1000  # filtered ids further apart than this are read as separate ranges
# A tag reaching more messages than this (by a guess from the conversations carrying it)
# is checked on each match read, not listed: listing costs some 2 us a message, checking
# one match a lookup, and a tag that reaches many is found in few matches read.
LISTED_AT_MOST = 20_000
MAX_SPANS = 8
LAST_ROWID = 2**63 - 1


@dataclass(frozen=True)
class Filters:
    role: "str | None"
    since: "str | None"  # created_at >= since
    until: "str | None"  # created_at < until
    reached: "list[int] | None"  # ids a conversation reaches, ascending
    tagged: bool = False  # by tags: what is allowed is spread thin across the index
    # A tag on many messages is checked per match instead of listed: the conversations
    # carrying it (a match's writer must be one) and their forks' starts.
    conversations: "list[int] | None" = None
    fork_starts: tuple = ()

    @property
    def on_messages(self) -> bool:
        """Whether a match must be looked up in the messages table."""
        return any(f is not None for f in (self.role, self.since, self.until))


MESSAGE_FILTERS = """
  AND (:role IS NULL OR m.role = :role)
  AND (:since IS NULL OR m.created_at >= :since)
  AND (:until IS NULL OR m.created_at < :until)"""

REACHED_IDS = q.REACHED_BY + "\nSELECT id FROM reached ORDER BY id"
# What a shared server's user's conversations reach: what they wrote, their heads, above.
REACHED_BY_OWNER = """
WITH RECURSIVE reached(id) AS (
    SELECT m.id FROM messages m JOIN conversations c ON c.id = m.conversation_id
    WHERE c.owner = :owner
    UNION
    SELECT head_id FROM conversations WHERE owner = :owner AND head_id IS NOT NULL
    UNION
    SELECT m.parent_id FROM messages m JOIN reached r ON m.id = r.id
    WHERE m.parent_id IS NOT NULL
)
SELECT id FROM reached ORDER BY id"""


# Bounding dates by rowid needs an index on created_at; without one the
# date filter is checked on each match instead.
HAS_DATE_INDEX = """
SELECT 1 FROM pragma_index_list('messages') l JOIN pragma_index_info(l.name) i
WHERE i.seqno = 0 AND i.name = 'created_at'"""
DATE_RANGE_IDS = """
SELECT min(id), max(id) FROM messages WHERE created_at >= :since AND created_at < :until"""
NO_SINCE, NO_UNTIL = "", "~"  # before and after every ISO 8601 time


def make_filters(conn, limit, conversation_id, role, since, until, tags=(), owner=None) -> Filters:
    """The filters of a search; `tags`: only in what the conversations carrying all of
    them reach (with `conversation_id` too: what both allow); `owner`: only what that
    user's conversations reach."""
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
    if owner is not None:
        theirs = [row[0] for row in conn.execute(REACHED_BY_OWNER, {"owner": owner})]
        reached = theirs if reached is None else sorted(set(reached) & set(theirs))
    if not tags:
        return Filters(role, start, end, reached)
    tagging = Tags(conn)
    convs = tagging.conversations(tags)
    if reached is None and len(convs) * tagging.messages_per_conversation() > LISTED_AT_MOST:
        return Filters(role, start, end, None, tagged=True, conversations=convs,
                       fork_starts=tuple(tagging.fork_starts(convs)))
    tagged = tagging.reached_by(convs)
    reached = tagged if reached is None else sorted(set(reached) & set(tagged))
    return Filters(role, start, end, reached, tagged=True)


def reached_ids(conn, filters: Filters) -> "list[int] | None":
    """The ids the filters allow, listed (None: any), for those who need them listed."""
    if filters.conversations is None:
        return filters.reached
    return Tags(conn).reached_by(filters.conversations)


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
