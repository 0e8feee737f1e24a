"""The full-text index kept in few segments, so that a search seeks few b-trees.

    merged = merge_segments(conn)   # steps taken; 0 when there were few enough

FTS5 writes a segment per transaction and merges four of a level into one of
the next (its automerge), so an archive written a turn at a time holds some
20-30 segments after a year, and every phrase of every statement seeks each
one. At 1M messages with 32 segments a statement cost what reading 300-1,000
matches in order does, and 60-150 in one segment (bench/organising.py).

Merging them all is FTS5's incremental optimize: a 'merge' with a negative
page count puts every segment on one level and starts, and positive ones go
on until a step changes fewer than two rows. Each step is a transaction of
its own, so a writer waits at most one step (at 1M messages: 47 steps, 60 ms
each by the median, 4 s in all). Only past MOST_SEGMENTS: after a merge the
count grows by about one per four-fold of transactions, so the whole index is
rewritten once in a thousand or so, not at every turn.
"""

import sqlite3

from ..storage.transaction import transaction

MOST_SEGMENTS = 16
STEP_PAGES = 1000  # pages written per step (FTS5's pages, 4 kB by default)

SEGMENTS = "SELECT count(DISTINCT segid) FROM messages_fts_idx"
MERGE = "INSERT INTO messages_fts(messages_fts, rank) VALUES ('merge', ?)"


def segments(conn: sqlite3.Connection) -> int:
    """How many segments the full-text index is in (a read of its small b-tree index)."""
    return conn.execute(SEGMENTS).fetchone()[0]


def merge_segments(conn: sqlite3.Connection, most: int = MOST_SEGMENTS,
                   stop=lambda: False) -> int:
    """Merge the index into one segment if it has more than `most`; the steps taken.

    `stop()` is asked between steps: what was merged is kept, and the next call
    carries on. A reader sees the same rows at every step."""
    if segments(conn) <= most:
        return 0
    steps, pages = 0, -STEP_PAGES
    while not stop():
        with transaction(conn):
            before = conn.total_changes
            conn.execute(MERGE, (pages,))
            worked = conn.total_changes - before >= 2
        steps, pages = steps + 1, STEP_PAGES
        if not worked:
            break
    return steps
