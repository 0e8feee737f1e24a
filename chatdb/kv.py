"""KV state in the archive, per message and engine fingerprint.

Two kinds: 'rows' holds the KV rows of exactly one message's tokens, so the
state for a path is the concatenation of its messages' rows and forks share
their ancestors' rows; 'snapshot' holds the state up to a message that is not
cut into rows: the whole state, for models whose memory cannot be cut, or
beside rows the part of it that cannot (a checkpoint of a fixed-size state,
valid with the rows of every message up to it).
"""

import json
import sqlite3
from dataclasses import dataclass

from . import kvcodec
from .clock import now
from .kvcodec import CorruptKV  # noqa: F401  (re-exported for callers)
from .queries import WALK_UP

KINDS = ("rows", "snapshot")

PUT = """
INSERT OR REPLACE INTO kv_segments
    (message_id, fingerprint, kind, n_tokens, codec, raw_size, checksum, created_at, data)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"""
GET = """
SELECT message_id, kind, n_tokens, codec, raw_size, checksum, data FROM kv_segments
WHERE message_id = ? AND fingerprint = ? AND kind = ?"""
DELETE = "DELETE FROM kv_segments WHERE message_id = ? AND fingerprint = ? AND kind = ?"
HAS = "SELECT 1 FROM kv_segments WHERE message_id = ? AND fingerprint = ? AND kind = ?"

# The deepest message on the path to :message_id from which state can be
# restored: for rows, every message from the root down must have its rows;
# a snapshot stands alone.
DEEPEST_RESTORABLE = WALK_UP + """,
marked AS (
    SELECT up.id, up.depth,
        EXISTS (SELECT 1 FROM kv_segments k WHERE k.message_id = up.id
                AND k.fingerprint = :fp AND k.kind = 'rows') AS has_rows,
        EXISTS (SELECT 1 FROM kv_segments k WHERE k.message_id = up.id
                AND k.fingerprint = :fp AND k.kind = 'snapshot') AS has_snapshot
    FROM up
)
SELECT id, depth, kind FROM (
    SELECT id, depth, 'rows' AS kind FROM marked
    WHERE depth < coalesce((SELECT min(depth) FROM marked WHERE NOT has_rows), 1 << 62)
    UNION ALL
    SELECT id, depth, 'snapshot' AS kind FROM marked WHERE has_snapshot
)
ORDER BY depth DESC, kind = 'snapshot' LIMIT 1"""

# Only the keys, in path order: blobs are then read one by one by primary
# key, because sorting rows that carry them copies every byte through
# SQLite's sorter (4x slower at 4,000 tokens).
ROWS_ALONG_PATH = WALK_UP + """
SELECT k.message_id, k.n_tokens, k.raw_size
FROM up JOIN kv_segments k ON k.message_id = up.id AND k.fingerprint = :fp AND k.kind = 'rows'
ORDER BY up.depth"""

# The messages on the path to :message_id (itself included) with a snapshot.
SNAPSHOTS_ALONG_PATH = WALK_UP + """
SELECT k.message_id FROM up JOIN kv_segments k
    ON k.message_id = up.id AND k.fingerprint = :fp AND k.kind = 'snapshot'"""

# Snapshots stored on the path above :message_id (itself excluded) that are
# neither a conversation's head nor a branch point: candidates to delete when
# a deeper snapshot supersedes them (the caller keeps periodic checkpoints).
SUPERSEDED_SNAPSHOTS = WALK_UP + """
SELECT k.message_id FROM up JOIN kv_segments k
    ON k.message_id = up.id AND k.fingerprint = :fp AND k.kind = 'snapshot'
WHERE up.id != :message_id
  AND NOT EXISTS (SELECT 1 FROM conversations c WHERE c.head_id = up.id)
  AND (SELECT count(*) FROM messages c WHERE c.parent_id = up.id) < 2"""

# Which of a list of messages have KV under a fingerprint (a window's messages,
# which skip part of their tree path).
KINDS_AMONG = """
SELECT message_id, kind FROM kv_segments
WHERE fingerprint = :fp AND message_id IN (SELECT value FROM json_each(:ids))"""

FINGERPRINTS_FOR = "SELECT DISTINCT fingerprint FROM kv_segments WHERE message_id = ?"
STORED_BYTES = "SELECT count(*), coalesce(sum(length(data)), 0), coalesce(sum(raw_size), 0) FROM kv_segments"
STORED_BYTES_FOR = STORED_BYTES + " WHERE fingerprint = ?"


@dataclass(frozen=True)
class Segment:
    message_id: int
    kind: str
    n_tokens: int
    codec: str
    raw_size: int
    checksum: str
    data: bytes

    def decode(self) -> bytes:
        """The raw KV bytes, or CorruptKV."""
        return kvcodec.decode(self.codec, self.data, self.raw_size, self.checksum)

    def planes(self):
        """The checked byte planes (kvcodec.decode_planes), for callers that interleave as they copy."""
        return kvcodec.decode_planes(self.codec, self.data, self.raw_size, self.checksum)


@dataclass(frozen=True)
class SegmentRef:
    message_id: int
    n_tokens: int
    raw_size: int = 0


@dataclass(frozen=True)
class Encoded:
    codec: str
    raw_size: int
    checksum: str
    blob: bytes


def encode(raw, plane_width: int = 2) -> Encoded:
    """Compress and checksum KV bytes (slow for large states: do it outside transactions)."""
    codec, blob, checksum = kvcodec.encode(raw, plane_width)
    return Encoded(codec, memoryview(raw).nbytes, checksum, blob)


@dataclass(frozen=True)
class Restorable:
    message_id: int
    depth: int
    kind: str


@dataclass(frozen=True)
class Usage:
    segments: int
    stored_bytes: int
    raw_bytes: int


class KVStore:
    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def put(self, message_id: int, fingerprint: str, kind: str, n_tokens: int, raw,
            plane_width: int = 2) -> int:
        """Compress and store `raw`; returns the stored size in bytes."""
        return self.put_encoded(message_id, fingerprint, kind, n_tokens, encode(raw, plane_width))

    def put_encoded(self, message_id: int, fingerprint: str, kind: str, n_tokens: int,
                    encoded: "Encoded") -> int:
        """Store bytes compressed beforehand (outside the write transaction)."""
        if kind not in KINDS:
            raise ValueError(f"unknown KV kind {kind!r}")
        self.conn.execute(PUT, (message_id, fingerprint, kind, n_tokens, encoded.codec,
                                encoded.raw_size, encoded.checksum, now(), encoded.blob))
        return len(encoded.blob)

    def get(self, message_id: int, fingerprint: str, kind: str = "rows") -> "Segment | None":
        row = self.conn.execute(GET, (message_id, fingerprint, kind)).fetchone()
        return Segment(*row) if row else None

    def has(self, message_id: int, fingerprint: str, kind: str = "rows") -> bool:
        return self.conn.execute(HAS, (message_id, fingerprint, kind)).fetchone() is not None

    def delete(self, message_id: int, fingerprint: str, kind: str = "rows") -> None:
        self.conn.execute(DELETE, (message_id, fingerprint, kind))

    def deepest_restorable(self, message_id: int, fingerprint: str) -> "Restorable | None":
        """Along the path to `message_id`, the deepest point whose KV is complete."""
        row = self.conn.execute(DEEPEST_RESTORABLE, {"message_id": message_id, "fp": fingerprint}).fetchone()
        return Restorable(*row) if row else None

    def deepest_along(self, message_ids: list[int], fingerprint: str) -> "Restorable | None":
        """Like deepest_restorable, for a sequence of messages given in order (a window:
        the system prompt, then the messages from its anchor on): rows must be stored
        for every message up to the point; a snapshot stands alone."""
        kinds: dict[int, set] = {}
        for message_id, kind in self.conn.execute(
                KINDS_AMONG, {"fp": fingerprint, "ids": json.dumps(message_ids)}):
            kinds.setdefault(message_id, set()).add(kind)
        rows = 0   # messages from the first on that all have rows
        while rows < len(message_ids) and "rows" in kinds.get(message_ids[rows], ()):
            rows += 1
        snapshots = [i for i, m in enumerate(message_ids) if "snapshot" in kinds.get(m, ())]
        depth = max([rows - 1] + snapshots)
        if depth < 0:
            return None
        kind = "rows" if depth == rows - 1 else "snapshot"   # rows first where as deep
        return Restorable(message_ids[depth], depth, kind)

    def rows_index(self, message_id: int, fingerprint: str) -> list["SegmentRef"]:
        """Which 'rows' segments lie on the path from the root to `message_id`, in path order."""
        rows = self.conn.execute(ROWS_ALONG_PATH, {"message_id": message_id, "fp": fingerprint})
        return [SegmentRef(*r) for r in rows]

    def rows_along_path(self, message_id: int, fingerprint: str) -> list[Segment]:
        """The 'rows' segments from the root down to `message_id`, in path order."""
        return [self.get(ref.message_id, fingerprint) for ref in self.rows_index(message_id, fingerprint)]

    def snapshots_along_path(self, message_id: int, fingerprint: str) -> set[int]:
        """Messages on the path from the root to `message_id` with a snapshot."""
        rows = self.conn.execute(SNAPSHOTS_ALONG_PATH, {"message_id": message_id, "fp": fingerprint})
        return {r[0] for r in rows}

    def superseded_snapshots(self, message_id: int, fingerprint: str) -> list[int]:
        """Messages above `message_id` whose snapshot is neither at a head nor at a branch point."""
        rows = self.conn.execute(SUPERSEDED_SNAPSHOTS, {"message_id": message_id, "fp": fingerprint})
        return [r[0] for r in rows]

    def fingerprints_for(self, message_id: int) -> set[str]:
        """Fingerprints any KV of this message is stored under."""
        return {r[0] for r in self.conn.execute(FINGERPRINTS_FOR, (message_id,))}

    def usage(self, fingerprint: "str | None" = None) -> Usage:
        if fingerprint is None:
            return Usage(*self.conn.execute(STORED_BYTES).fetchone())
        return Usage(*self.conn.execute(STORED_BYTES_FOR, (fingerprint,)).fetchone())
