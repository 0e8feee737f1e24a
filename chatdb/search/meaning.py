"""The messages nearest a query vector: cosine similarity over the stored vectors.

A process keeps each archive's vectors of one model in memory as sign bits
(one bit per dimension: 48 bytes for 384), loaded once and then followed by
row id; a deletion anywhere makes it reload. A search ranks every chunk by
the Hamming distance of its bits to the query's, rescores the nearest
FIRST_PASS by the exact cosine of their stored int8 vectors (read by row
id), and gives each message the score of its best chunk. A search within
one conversation scores that conversation's vectors exactly.
"""

import json
import sqlite3
import threading
from dataclasses import dataclass

import numpy as np

from .filters import Filters, search_ranges

FIRST_PASS = 2000  # chunks rescored exactly (every chunk, in an archive this small)
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
            cursor = conn.execute(LOAD, (self.model_id, last))
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
        if len(rows) <= FIRST_PASS:
            return rows.tolist()
        distance = np.bitwise_count(bits ^ sign_bits(query[None, :])).sum(axis=1, dtype=np.int32)
        return rows[np.argpartition(distance, FIRST_PASS)[:FIRST_PASS]].tolist()


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
    if filters.reached is not None:
        rows = conn.execute(VECTORS_OF_MESSAGES, (model_id, json.dumps(filters.reached))).fetchall()
    else:
        ranges = search_ranges(conn, filters) if (filters.since or filters.until) else None
        if ranges == []:
            return []
        candidates = memory_index(conn, model_id).first_pass(query, ranges)
        rows = conn.execute(VECTORS_BY_ROW, (json.dumps(candidates),)).fetchall() if candidates else []
    return best_per_message(rows, query, limit)


def best_per_message(rows, query: np.ndarray, limit: int) -> list[Near]:
    """(message_id, start, int8 vector) rows scored by cosine; each message once, best first."""
    if not rows:
        return []
    matrix = np.frombuffer(b"".join(r[2] for r in rows), np.int8).reshape(len(rows), -1)
    matrix = matrix.astype(np.float32)
    scores = matrix @ query / np.maximum(np.linalg.norm(matrix, axis=1), 1e-6)
    found: dict[int, Near] = {}
    for i in np.argsort(-scores, kind="stable"):
        message_id = rows[i][0]
        if message_id not in found:
            found[message_id] = Near(message_id, float(scores[i]), rows[i][1])
            if len(found) == limit:
                break
    return list(found.values())
