"""The messages nearest a query vector: cosine similarity over the stored vectors.

A process keeps each archive's vectors of one model in memory as sign bits
(one bit per dimension: 48 bytes for 384), loaded once and then followed by
row id; a deletion anywhere makes it reload. A search narrows the chunks
in three passes, each finer and on fewer: the Hamming distance of their
bits to the query's signs (all of them; the nearest HAMMING_SHARE kept),
the query's own values summed over each chunk's set bits (an asymmetric
score, which ranks far closer to the cosine than Hamming does; the best
RESCORED_SHARE kept, at least FIRST_PASS), and the exact cosine of their
stored int8 vectors, read by row id. Each message scores as its best chunk.
A search within one conversation scores that conversation's vectors exactly.
"""

import json
import sqlite3
import threading
from dataclasses import dataclass

import numpy as np

from .filters import Filters, reached_ids, search_ranges

FIRST_PASS = 2000        # chunks rescored exactly at least (all of them in an archive this small)
RESCORED_SHARE = 0.01    # of the chunks, rescored exactly in a larger archive
HAMMING_SHARE = 0.1      # of the chunks, given the asymmetric score (at least MIN_ASYMMETRIC)
MIN_ASYMMETRIC = 10_000
LOAD_BATCH = 50_000

LOAD = """
SELECT id, message_id, vector FROM message_vectors
WHERE model_id = ? AND id > ? AND length(vector) > 0 ORDER BY id"""
DELETIONS = "SELECT deletions FROM embedding_models WHERE id = ?"
VECTORS_BY_ROW = """
SELECT message_id, start, vector FROM message_vectors
WHERE id IN (SELECT value FROM json_each(?))"""
VECTORS_OF_MESSAGES = """
SELECT message_id, start, vector FROM message_vectors
WHERE model_id = ? AND message_id IN (SELECT value FROM json_each(?)) AND length(vector) > 0"""
DATABASE_FILE = "SELECT file FROM pragma_database_list WHERE name = 'main'"


@dataclass(frozen=True)
class Near:
    message_id: int
    similarity: float   # cosine, -1..1
    start: int          # where the best chunk begins in the message


class MemoryIndex:
    """One model's vectors of one archive, as sign bits, row ids and message ids."""

    def __init__(self, model_id: int):
        self.model_id = model_id
        self.rows = np.empty(0, np.int64)
        self.messages = np.empty(0, np.int64)
        self.bits = np.empty((0, 0), np.uint64)
        self.deletions = -1
        self.lock = threading.Lock()

    def refresh(self, conn: sqlite3.Connection) -> None:
        """Read the rows added since the last look; everything again after a deletion."""
        deletions = conn.execute(DELETIONS, (self.model_id,)).fetchone()[0]
        with self.lock:
            if deletions != self.deletions:
                self.rows, self.messages = np.empty(0, np.int64), np.empty(0, np.int64)
                self.bits, self.deletions = np.empty((0, 0), np.uint64), deletions
            last = int(self.rows[-1]) if len(self.rows) else 0
            parts = [(self.rows, self.messages, self.bits)] if len(self.rows) else []
            cursor = _tuple_cursor(conn, LOAD, (self.model_id, last))
            while batch := cursor.fetchmany(LOAD_BATCH):
                rows, messages, blobs = zip(*batch)
                vectors = np.frombuffer(b"".join(blobs), np.int8).reshape(len(batch), -1)
                parts.append((np.array(rows, np.int64), np.array(messages, np.int64),
                              sign_bits(vectors)))
            if len(parts) > 1 or (parts and not len(self.rows)):
                self.rows = np.concatenate([p[0] for p in parts])
                self.messages = np.concatenate([p[1] for p in parts])
                self.bits = np.concatenate([p[2] for p in parts])

    def first_pass(self, query: np.ndarray, ranges: "list[tuple[int, int]] | None") -> list[int]:
        """Row ids of the FIRST_PASS chunks nearest by Hamming distance, within `ranges`
        of message ids (None: all)."""
        with self.lock:
            rows, messages, bits = self.rows, self.messages, self.bits
        if ranges is not None:
            keep = np.zeros(len(rows), bool)
            for lo, hi in ranges:
                keep |= (messages >= lo) & (messages <= hi)
            rows, bits = rows[keep], bits[keep]
        return rows[narrowed(bits, query, *pass_sizes(len(rows)))].tolist()


def pass_sizes(n: int) -> tuple[int, int]:
    """(chunks given the asymmetric score, chunks rescored exactly) of n chunks."""
    rescored = max(FIRST_PASS, int(n * RESCORED_SHARE))
    return max(MIN_ASYMMETRIC, int(n * HAMMING_SHARE), rescored), rescored


def narrowed(bits: np.ndarray, query: np.ndarray, asymmetric: int, rescored: int) -> np.ndarray:
    """Indexes of the `rescored` rows of `bits` nearest `query`, by Hamming distance
    down to `asymmetric` rows, then by the asymmetric score."""
    picked = np.arange(len(bits))
    if len(picked) <= rescored:
        return picked
    if len(picked) > asymmetric:
        picked = nearest_by_hamming(bits, sign_bits(query[None, :]), asymmetric)
    score = asymmetric_scores(bits[picked], query)
    return picked[np.argpartition(-score, rescored)[:rescored]]


def nearest_by_hamming(bits: np.ndarray, query_bits: np.ndarray, keep: int) -> np.ndarray:
    """Indexes of at least `keep` rows nearest by Hamming distance (all those at the cut).

    Distances are small integers: the cut is read from their histogram, which
    costs less than a partial sort of a million of them."""
    counts = np.bitwise_count(bits ^ query_bits)          # (rows, words) of uint8
    distance = counts[:, 0].astype(np.uint16)
    for word in range(1, counts.shape[1]):
        distance += counts[:, word]
    cut = int(np.searchsorted(np.cumsum(np.bincount(distance)), keep))
    return np.flatnonzero(distance <= cut)


# Each byte's bits, most significant first (as np.packbits packs them).
BYTE_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(np.float32)


def asymmetric_scores(bits: np.ndarray, query: np.ndarray) -> np.ndarray:
    """For each row, the sum of the query's values at its set bits: a table of the 256
    byte values per byte position, then one lookup per byte."""
    octets = bits.view(np.uint8)
    padded = np.zeros(octets.shape[1] * 8, np.float32)
    padded[:len(query)] = query
    table = (BYTE_BITS @ padded.reshape(-1, 8).T).T          # (bytes, 256)
    score = np.zeros(len(octets), np.float32)
    for position in range(octets.shape[1]):
        score += table[position][octets[:, position]]
    return score


def sign_bits(vectors: np.ndarray) -> np.ndarray:
    """Each row's signs as bits, padded to whole 64-bit words."""
    packed = np.packbits(vectors > 0, axis=1)
    pad = -packed.shape[1] % 8
    if pad:
        packed = np.pad(packed, ((0, 0), (0, pad)))
    return np.ascontiguousarray(packed).view(np.uint64)


_indexes: dict[tuple[str, int], MemoryIndex] = {}
_indexes_lock = threading.Lock()


def memory_index(conn: sqlite3.Connection, model_id: int) -> MemoryIndex:
    """This process's index of the archive's vectors of `model_id`, brought up to date."""
    key = (conn.execute(DATABASE_FILE).fetchone()[0] or f"memory:{id(conn)}", model_id)
    with _indexes_lock:
        index = _indexes.setdefault(key, MemoryIndex(model_id))
    index.refresh(conn)
    return index


def nearest(conn: sqlite3.Connection, model_id: int, query: np.ndarray, filters: Filters,
            limit: int) -> list[Near]:
    """The `limit` messages nearest `query` (a unit vector) within the conversation and
    date range of `filters`, best first (role is the caller's to check)."""
    reached = reached_ids(conn, filters)
    if reached is not None:
        rows = _tuples(conn, VECTORS_OF_MESSAGES, (model_id, json.dumps(reached)))
    else:
        ranges = search_ranges(conn, filters) if (filters.since or filters.until) else None
        if ranges == []:
            return []
        candidates = memory_index(conn, model_id).first_pass(query, ranges)
        # In row order: neighbouring rows share pages.
        rows = _tuples(conn, VECTORS_BY_ROW, (json.dumps(sorted(candidates)),)) if candidates else []
    return best_per_message(rows, query, limit)


def _tuples(conn: sqlite3.Connection, sql: str, params) -> list[tuple]:
    return _tuple_cursor(conn, sql, params).fetchall()


def _tuple_cursor(conn: sqlite3.Connection, sql: str, params) -> sqlite3.Cursor:
    """`sql`'s rows as plain tuples: thousands of them (a million at a load) are read far
    faster than as sqlite3.Row."""
    cursor = conn.cursor()
    cursor.row_factory = None
    return cursor.execute(sql, params)


def best_per_message(rows, query: np.ndarray, limit: int) -> list[Near]:
    """(message_id, start, int8 vector) rows scored by cosine; each message once, best first."""
    if not rows:
        return []
    messages, starts, blobs = zip(*rows)
    matrix = np.frombuffer(b"".join(blobs), np.int8).reshape(len(rows), -1).astype(np.float32)
    # einsum, not BLAS: for a few thousand rows a BLAS thread pool's wake-up costs more
    # than the sums (5x, on two busy cores).
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
    scores = np.einsum("ij,j->i", matrix, query) / np.maximum(norms, 1e-6)
    order = np.argsort(-scores, kind="stable")
    ids = np.asarray(messages)[order]
    _, first = np.unique(ids, return_index=True)   # each message's best chunk
    best = order[np.sort(first)[:limit]]
    return [Near(messages[i], float(scores[i]), starts[i]) for i in best]
