"""One search, two signals: the words (bm25) and the meaning (cosine similarity), fused.

    hits = search(conn, "that flaky upload fix", by="both", meaning=Meaning(model_id, vector))

Each signal ranks its own DEPTH best messages under the same filters; the
two rankings are fused by reciprocal rank (a message's score is the sum of
1 / (RRF_K + rank) over the rankings that hold it), which needs no common
scale between a bm25 score and a cosine. `by="words"` is the full-text
search itself (fulltext.search), hit for hit. A hit matched by words keeps
its full-text snippet, matches marked; one found by meaning alone shows the
start of its nearest chunk.
"""

import json
import sqlite3
from dataclasses import dataclass

import numpy as np

from ..errors import SearchError
from ..storage.transaction import read_snapshot
from . import fulltext
from .filters import MESSAGE_FILTERS, Filters, make_filters
from .fulltext import Hit, make_hit
from .meaning import Near, nearest
from .query import match_expression
from .ranking import HIT_ROWS, best_matches
from .snippets import ELLIPSIS, snippets_for
from .tag_terms import split_tags
from .textindex import NO_MARKS

BY = ("words", "meaning", "both")
DEPTH = 50          # messages each signal ranks for the fusion
RRF_K = 60          # the usual constant: rank 1 scores 1/61, rank 50 scores 1/110
SNIPPET_WORDS = 24  # of a chunk shown for a hit found by meaning alone
MORE_FOR_ROLE = 4   # the meaning ranking read again this many times deeper when a role filter rejects
# Below this cosine a message is not taken as near in meaning (all-MiniLM puts
# unrelated English text around 0 to 0.15): a query about nothing in the
# archive finds nothing rather than the least unrelated messages.
MIN_SIMILARITY = 0.2

CONTENT = "SELECT id, content FROM messages WHERE id IN (SELECT value FROM json_each(?))"
PASSING = """
SELECT m.id FROM messages m WHERE m.id IN (SELECT value FROM json_each(:ids))""" + MESSAGE_FILTERS


@dataclass(frozen=True)
class Meaning:
    model_id: int
    vector: np.ndarray   # the query's unit vector, from the same model


@dataclass(frozen=True)
class RankedHit(Hit):
    words_rank: "int | None" = None     # 1 = best by words; None: not among its DEPTH best
    meaning_rank: "int | None" = None
    similarity: "float | None" = None   # cosine of the query and the message's nearest chunk
    fused: "float | None" = None        # reciprocal-rank score (by both)


def search(conn: sqlite3.Connection, query: str, *, by: str = "both",
           meaning: "Meaning | None" = None, limit: int = 20,
           conversation_id: "int | None" = None, role: "str | None" = None,
           since: "str | None" = None, until: "str | None" = None, tags=(),
           owner: "str | None" = None) -> list[RankedHit]:
    """The best `limit` messages for `query` by words, meaning or both, best first.

    Raises SearchError as fulltext.search does (a query of too many words
    included, whatever `by`), and when `by` needs a `meaning` not given.
    """
    if by not in BY:
        raise SearchError(f"by must be one of {', '.join(BY)}, not {by!r}")
    query, named = split_tags(query)   # `meaning` is the caller's: of the query without them
    tags = [*tags, *named]
    if by == "words":
        hits = fulltext.search(conn, query, limit=limit, conversation_id=conversation_id,
                               role=role, since=since, until=until, tags=tags, owner=owner)
        return [RankedHit(**hit.__dict__, words_rank=i) for i, hit in enumerate(hits, 1)]
    if meaning is None:
        raise SearchError(f"a search by {by} needs an embedding model")
    with read_snapshot(conn):
        filters = make_filters(conn, limit, conversation_id, role, since, until, tags, owner)
        match = match_expression(conn, query)  # a bad query fails as by words
        if match is None:
            return []
        depth = max(DEPTH, limit)
        words, scores = _by_words(conn, match, filters, depth) if by == "both" else ([], {})
        near = _by_meaning(conn, meaning, filters, depth)
        return _fused(conn, match, words, scores, near, limit, conversation_id, by)


def _by_words(conn, match: str, filters: Filters, depth: int) -> tuple[list, dict]:
    rows, scores = best_matches(conn, match, filters, depth)
    return [row[0] for row in rows], scores


def _by_meaning(conn, meaning: Meaning, filters: Filters, depth: int) -> list[Near]:
    """The `depth` nearest messages that pass the role and date filters too."""
    want = depth
    while True:
        found = nearest(conn, meaning.model_id, meaning.vector, filters, want)
        near = [n for n in found if n.similarity >= MIN_SIMILARITY]
        if not filters.on_messages:
            return near
        passing = {row[0] for row in conn.execute(PASSING, {
            "ids": json.dumps([n.message_id for n in near]), "role": filters.role,
            "since": filters.since, "until": filters.until})}
        kept = [n for n in near if n.message_id in passing]
        if len(kept) >= depth or len(near) < len(found) or len(found) < want \
                or want >= depth * MORE_FOR_ROLE ** 3:
            return kept[:depth]
        want *= MORE_FOR_ROLE


def _fused(conn, match: str, words: list[int], scores: dict, near: list[Near], limit: int,
           conversation_id, by: str) -> list[RankedHit]:
    words_rank = {message_id: i for i, message_id in enumerate(words, 1)}
    meaning_rank = {n.message_id: i for i, n in enumerate(near, 1)}
    nearest_chunk = {n.message_id: n for n in near}
    fused = {m: sum(1 / (RRF_K + r[m]) for r in (words_rank, meaning_rank) if m in r)
             for m in {**words_rank, **meaning_rank}}
    order = sorted(fused, key=lambda m: (-fused[m], words_rank.get(m, 10**9), -m))[:limit]
    if not order:
        return []
    rows = {row[0]: row for row in conn.execute(HIT_ROWS, {
        "ids": json.dumps(order), "role": None, "since": None, "until": None})}
    marked = snippets_for(conn, match, [m for m in order if m in words_rank])
    plain = _chunk_snippets(conn, [nearest_chunk[m] for m in order if m not in marked])
    hits = []
    for m in order:
        hit = make_hit(conn, rows[m], marked.get(m) or plain.get(m, ""), scores.get(m, 0.0),
                       conversation_id)
        near_m = nearest_chunk.get(m)
        hits.append(RankedHit(**hit.__dict__, words_rank=words_rank.get(m),
                              meaning_rank=meaning_rank.get(m),
                              similarity=near_m.similarity if near_m else None,
                              fused=fused[m] if by == "both" else None))
    return hits


def _chunk_snippets(conn, near: list[Near]) -> dict[int, str]:
    """The first SNIPPET_WORDS words of each message's nearest chunk, on one line."""
    if not near:
        return {}
    content = dict(conn.execute(CONTENT, (json.dumps([n.message_id for n in near]),)).fetchall())
    out = {}
    for n in near:
        text = content.get(n.message_id, "").translate(NO_MARKS)  # no mark but the index's
        words = text[n.start:].split()
        snippet = " ".join(words[:SNIPPET_WORDS])
        out[n.message_id] = ((ELLIPSIS if text[:n.start].strip() else "") + snippet
                             + (ELLIPSIS if len(words) > SNIPPET_WORDS else ""))
    return out
