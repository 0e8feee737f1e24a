"""KV state in the archive, per message and engine fingerprint.

Two kinds: 'rows' holds the KV rows of exactly one message's tokens, so the
state for a path is the concatenation of its messages' rows and forks share
their ancestors' rows (and siblings the leading rows that are the same bytes
in both: a run stored once in kv_shared_rows, which the segment names and
then holds only its other rows); 'snapshot' holds the state up to a message that is not
cut into rows: the whole state, for models whose memory cannot be cut, or
beside rows the part of it that cannot (a checkpoint of a fixed-size state,
valid with the rows of every message up to it).
"""

import json
import sqlite3
from dataclasses import dataclass

from ..clock import now
from ..queries import WALK_UP
from . import codec as kvcodec
from .codec import CorruptKV  # noqa: F401  (re-exported for callers

KINDS = ("rows", "snapshot")

# An upsert, not INSERT OR REPLACE: a replaced row's shared run is released
# by the update trigger (REPLACE's implicit delete fires no trigger).
PUT = """
INSERT INTO kv_segments
    (message_id, fingerprint, kind, n_tokens, codec, raw_size, checksum, created_at, data, shared_id)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (message_id, fingerprint, kind) DO UPDATE SET
    n_tokens = excluded.n_tokens, codec = excluded.codec, raw_size = excluded.raw_size,
    checksum = excluded.checksum, created_at = excluded.created_at, data = excluded.data,
    shared_id = excluded.shared_id"""
PUT_SHARED = """
INSERT INTO kv_shared_rows (fingerprint, digest, n_tokens, codec, raw_size, checksum, created_at, data)
VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (fingerprint, digest) DO NOTHING"""
SHARED_ID = "SELECT id FROM kv_shared_rows WHERE fingerprint = ? AND digest = ?"
GET_SHARED = """
SELECT NULL, 'shared rows', n_tokens, codec, raw_size, checksum, data FROM kv_shared_rows WHERE id = ?"""
DELETE_SHARED = "DELETE FROM kv_shared_rows WHERE id = ?"
# A sibling's rows rewritten to begin with a shared run, if unchanged since read.
SHARE = """
UPDATE kv_segments SET shared_id = :shared_id, codec = :codec, raw_size = :raw_size,
    checksum = :checksum, data = :data
WHERE message_id = :message_id AND fingerprint = :fp AND kind = 'rows'
  AND shared_id IS NULL AND checksum = :was"""
# The latest other children of the message's parent with rows under the fingerprint.
SIBLING_ROWS = """
SELECT k.message_id, k.n_tokens, k.raw_size + coalesce(s.raw_size, 0), k.shared_id,
       coalesce(s.n_tokens, 0)
FROM messages me JOIN messages sib ON sib.parent_id = me.parent_id AND sib.id != me.id
JOIN kv_segments k ON k.message_id = sib.id AND k.fingerprint = :fp AND k.kind = 'rows'
LEFT JOIN kv_shared_rows s ON s.id = k.shared_id
WHERE me.id = :message_id
ORDER BY k.message_id DESC LIMIT :limit"""
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
# raw_size counts the shared run a segment begins with, if any.
ROWS_ALONG_PATH = WALK_UP + """
SELECT k.message_id, k.n_tokens, k.raw_size + coalesce(s.raw_size, 0), k.shared_id,
       coalesce(s.n_tokens, 0)
FROM up JOIN kv_segments k ON k.message_id = up.id AND k.fingerprint = :fp AND k.kind = 'rows'
LEFT JOIN kv_shared_rows s ON s.id = k.shared_id
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
# Segments and shared runs together.
STORED_BYTES = """
SELECT count(*), coalesce(sum(length(data)), 0), coalesce(sum(raw_size), 0) FROM (
    SELECT data, raw_size, fingerprint FROM kv_segments
    UNION ALL SELECT data, raw_size, fingerprint FROM kv_shared_rows)"""
STORED_BYTES_FOR = STORED_BYTES + " WHERE fingerprint = ?"
STORED_TOKENS_FOR = "SELECT coalesce(sum(n_tokens), 0) FROM kv_segments WHERE fingerprint = ? AND kind = 'rows'"


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
    raw_size: int = 0                 # of all its rows, the shared run's included
    shared_id: "int | None" = None    # the shared run (kv_shared_rows) its rows begin with
    shared_tokens: int = 0            # tokens of that run


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
                    encoded: "Encoded", shared_id: "int | None" = None) -> int:
        """Store bytes compressed beforehand (outside the write transaction); with
        `shared_id`, rows that begin with that shared run and go on with `encoded`."""
        if kind not in KINDS:
            raise ValueError(f"unknown KV kind {kind!r}")
        self.conn.execute(PUT, (message_id, fingerprint, kind, n_tokens, encoded.codec,
                                encoded.raw_size, encoded.checksum, now(), encoded.blob, shared_id))
        return len(encoded.blob)

    def put_shared(self, fingerprint: str, digest: str, n_tokens: int, encoded: "Encoded") -> "tuple[int, int]":
        """The shared run with this digest, stored unless it is already: (its id, bytes added)."""
        added = self.conn.execute(PUT_SHARED, (fingerprint, digest, n_tokens, encoded.codec,
                                               encoded.raw_size, encoded.checksum, now(),
                                               encoded.blob)).rowcount
        (shared_id,) = self.conn.execute(SHARED_ID, (fingerprint, digest)).fetchone()
        return shared_id, len(encoded.blob) if added else 0

    def get_shared(self, shared_id: int) -> "Segment | None":
        row = self.conn.execute(GET_SHARED, (shared_id,)).fetchone()
        return Segment(*row) if row else None

    def delete_shared(self, shared_id: int) -> None:
        """A shared run, and with it every segment that begins with it."""
        self.conn.execute(DELETE_SHARED, (shared_id,))

    def share(self, message_id: int, fingerprint: str, shared_id: int, rest: "Encoded", was: str) -> bool:
        """Rewrite a message's rows as `shared_id` followed by `rest`, if its segment is
        still the unshared one with checksum `was`; whether it was."""
        return self.conn.execute(SHARE, {
            "message_id": message_id, "fp": fingerprint, "shared_id": shared_id, "codec": rest.codec,
            "raw_size": rest.raw_size, "checksum": rest.checksum, "data": rest.blob, "was": was,
        }).rowcount == 1

    def sibling_rows(self, message_id: int, fingerprint: str, limit: int) -> list["SegmentRef"]:
        """The rows of the message's latest `limit` siblings (other children of its parent)."""
        rows = self.conn.execute(SIBLING_ROWS, {"message_id": message_id, "fp": fingerprint, "limit": limit})
        return [SegmentRef(*r) for r in rows]

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
        """The 'rows' segments from the root down to `message_id`, in path order, as stored
        (one that begins with a shared run holds only the rows after it)."""
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

    def stored_tokens(self, fingerprint: str) -> int:
        """Tokens whose rows are stored under the fingerprint."""
        return self.conn.execute(STORED_TOKENS_FOR, (fingerprint,)).fetchone()[0]

    def usage(self, fingerprint: "str | None" = None) -> Usage:
        if fingerprint is None:
            return Usage(*self.conn.execute(STORED_BYTES).fetchone())
        return Usage(*self.conn.execute(STORED_BYTES_FOR, (fingerprint,)).fetchone())
