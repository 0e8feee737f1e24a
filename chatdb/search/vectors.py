"""Stored message vectors, per embedding model: written, counted, read back.

The archive stores vectors and never computes one: the engine's embedding
model (engine/embed) hands them over as unit float32 rows, stored as int8
(value * 127, rounded).
"""

import sqlite3
from dataclasses import dataclass

import numpy as np

from ..clock import now
from ..queries import LAST_MESSAGE_ID, MESSAGE_EXISTS, WRITTEN_AFTER

SCALE = 127.0

MODEL_ID = "SELECT id FROM embedding_models WHERE fingerprint = ?"
ADD_MODEL = """
INSERT INTO embedding_models (fingerprint, name, dims, created_at) VALUES (?, ?, ?, ?)
ON CONFLICT (fingerprint) DO NOTHING"""
MODELS = """
SELECT e.id, e.fingerprint, e.name, e.dims, e.created_at,
    (SELECT count(DISTINCT message_id) FROM message_vectors v WHERE v.model_id = e.id) AS messages,
    (SELECT count(*) FROM message_vectors v WHERE v.model_id = e.id AND length(v.vector) > 0)
        AS chunks
FROM embedding_models e ORDER BY e.id"""
PUT = """
INSERT INTO message_vectors (model_id, message_id, chunk, start, vector) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (message_id, model_id, chunk) DO NOTHING"""
# Messages without vectors of the model, newest first (the ones searched for most).
UNINDEXED = """
SELECT m.id, m.content FROM messages m
WHERE m.id > :after AND m.id < :before
  AND NOT EXISTS (SELECT 1 FROM message_vectors v WHERE v.message_id = m.id AND v.model_id = :model)
ORDER BY m.id DESC
LIMIT :limit"""
COUNT_UNINDEXED = """
SELECT count(*) FROM messages m
WHERE m.id > :after
  AND NOT EXISTS (SELECT 1 FROM message_vectors v WHERE v.message_id = m.id AND v.model_id = :model)"""
VECTOR_BYTES = "SELECT coalesce(sum(length(vector)), 0) + count(*) * 24 FROM message_vectors"


@dataclass(frozen=True)
class IndexInfo:
    id: int
    fingerprint: str
    name: str
    dims: int
    created_at: str
    messages: int   # messages with vectors (blank ones included)
    chunks: int     # vectors


def encode(vector: np.ndarray) -> bytes:
    return np.clip(np.rint(vector * SCALE), -127, 127).astype(np.int8).tobytes()


def decode(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, np.int8)


class VectorStore:
    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def model_id(self, fingerprint: str) -> "int | None":
        row = self.conn.execute(MODEL_ID, (fingerprint,)).fetchone()
        return row[0] if row else None

    def add_model(self, fingerprint: str, name: str, dims: int) -> int:
        """The id of the model's index, made if new (inside the caller's transaction)."""
        self.conn.execute(ADD_MODEL, (fingerprint, name, dims, now()))
        return self.model_id(fingerprint)

    def indexes(self) -> list[IndexInfo]:
        return [IndexInfo(*row) for row in self.conn.execute(MODELS)]

    def put(self, model_id: int, message_id: int, starts: list[int], vectors: np.ndarray) -> bool:
        """Store a message's chunk vectors (inside the caller's transaction); False if the
        message is gone (deleted meanwhile). A blank message gets its empty row."""
        if self.conn.execute(MESSAGE_EXISTS, (message_id,)).fetchone() is None:
            return False
        rows = [(model_id, message_id, i, start, encode(v))
                for i, (start, v) in enumerate(zip(starts, vectors))]
        self.conn.executemany(PUT, rows or [(model_id, message_id, 0, 0, b"")])
        return True

    def unindexed(self, model_id: int, limit: int, before: "int | None" = None,
                  after: int = 0) -> list[tuple[int, str]]:
        """(id, content) of up to `limit` messages without vectors, newest first, between
        `after` and `before` (exclusive)."""
        return [(row[0], row[1]) for row in self.conn.execute(UNINDEXED, {
            "model": model_id, "after": after, "before": before or 2**63 - 1, "limit": limit})]

    def count_unindexed(self, model_id: "int | None", after: int = 0) -> int:
        if model_id is None:
            return self.conn.execute(WRITTEN_AFTER, (after,)).fetchone()[0]
        return self.conn.execute(COUNT_UNINDEXED, {"model": model_id, "after": after}).fetchone()[0]

    def last_message_id(self) -> int:
        return self.conn.execute(LAST_MESSAGE_ID).fetchone()[0]

    def stored_bytes(self) -> int:
        """About what the vectors take in the file (their bytes and each row's keys)."""
        return self.conn.execute(VECTOR_BYTES).fetchone()[0]
