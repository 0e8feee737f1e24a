"""Keeping an archive's KV within its budget, and giving the freed disk back.

Whoever stores KV (the engine's writer, in its own thread, after the answer)
first makes room, in the transaction that stores: what is worth least goes
(eviction.py), never messages, tokens or search entries, and never the path
being stored. A drop is one transaction, so a kill -9 during it loses
nothing and leaves every segment whole; a restore under way in another
process reads a snapshot of the archive, and finishes with what it began.

Freed pages go back to the file system: the archive is in incremental
auto-vacuum (connection.py), so the free pages are cut off the end of the
file, and the write-ahead log is checkpointed and truncated, so that it does
not hold them either.
"""

from dataclasses import dataclass

from ..clock import now
from ..queries import WALK_UP
from ..storage import dbapi
from ..storage.replication import is_replicated
from . import eviction
from .budget import format_size
from .report import file_sizes, stored

RECORD_USE = """
INSERT INTO kv_uses (message_id, fingerprint, used_at) VALUES (:message_id, :fp, :at)
ON CONFLICT (message_id, fingerprint) DO UPDATE SET used_at = max(used_at, excluded.used_at)"""
# The points above a use on its path: its own row now speaks for them.
FORGET_ABOVE = WALK_UP + """
DELETE FROM kv_uses WHERE fingerprint = :fp AND message_id != :message_id
  AND message_id IN (SELECT id FROM up)"""
RECORD_REOPENING = "INSERT INTO kv_reopenings (at, restored_tokens, reusable_tokens) VALUES (?, ?, ?)"
KEEP_REOPENINGS = 1000   # rows kept: more than the report reads
TRIM_REOPENINGS = "DELETE FROM kv_reopenings WHERE id <= (SELECT max(id) FROM kv_reopenings) - ?"
WAL_SHARE = 20   # a log past 1/WAL_SHARE of the budget is checkpointed after a store


@dataclass(frozen=True)
class Room:
    left: "int | None"    # bytes free under the budget after dropping (None: no budget)
    dropped: int          # segments dropped to make it

    def fits(self, size: int) -> bool:
        return self.left is None or size <= self.left


@dataclass(frozen=True)
class Pruned:
    dropped: int          # segments dropped
    freed_bytes: int      # KV bytes they held
    file_before: int      # the archive file and its log, before and after giving the pages back
    file_after: int

    def describe(self) -> str:
        return (f"dropped {self.dropped:,} KV segments ({format_size(self.freed_bytes)}); "
                f"the file went from {format_size(self.file_before)} to {format_size(self.file_after)}")


class KVKeeping:
    def __init__(self, archive):
        self.archive = archive
        self.conn = archive.conn

    def make_room(self, needed: int, protect=frozenset(), span: int = eviction.DEFAULT_SPAN) -> Room:
        """Drop what is worth least until `needed` more bytes fit the budget (all it may,
        where they cannot), inside the caller's transaction; `protect`: message ids whose
        KV stays (the path being stored)."""
        budget = self.archive.kv_budget.get()
        if budget.bytes is None:
            return Room(None, 0)
        kv, _ = stored(self.conn)
        victims = []
        if kv + needed > budget.bytes:
            victims = eviction.plan(self.conn, kv + needed - budget.bytes, protect, span)
            self.drop(victims)
            kv, _ = stored(self.conn)
        return Room(budget.bytes - kv, len(victims))

    def drop(self, victims: "list[eviction.Victim]") -> None:
        for victim in victims:
            self.archive.kv.delete(victim.message_id, victim.fingerprint, victim.kind)

    def prune(self, span: int = eviction.DEFAULT_SPAN) -> Pruned:
        """Apply the budget now (nothing is protected), then give the free pages back."""
        before = self.file_bytes()
        with self.archive.transaction():
            budget = self.archive.kv_budget.get()
            kv, _ = stored(self.conn)
            victims = []
            if budget.bytes is not None and kv > budget.bytes:
                victims = eviction.plan(self.conn, kv - budget.bytes, frozenset(), span)
                self.drop(victims)
            freed = kv - stored(self.conn)[0]
        self.give_back()
        return Pruned(len(victims), freed, before, self.file_bytes())

    def stored_bytes(self) -> int:
        """Bytes of KV stored now, all fingerprints (what the budget bounds)."""
        return stored(self.conn)[0]

    def record_use(self, fingerprint: str, message_id: int, at: "str | None" = None) -> None:
        """The KV of the path ending at `message_id` was used (restored or written) at `at`
        (default now); inside the caller's transaction."""
        params = {"message_id": message_id, "fp": fingerprint, "at": at or now()}
        self.conn.execute(RECORD_USE, params)
        self.conn.execute(FORGET_ABOVE, params)

    def record_reopening(self, restored_tokens: int, reusable_tokens: int) -> None:
        """A turn reopened a conversation: `restored_tokens` of its `reusable_tokens` came
        from the archive."""
        self.conn.execute(RECORD_REOPENING, (now(), restored_tokens, reusable_tokens))
        self.conn.execute(TRIM_REOPENINGS, (KEEP_REOPENINGS,))

    def after_store(self, dropped: int) -> None:
        """What a writer does once a path is stored: give the disk back where KV was dropped,
        or where the write-ahead log holds much next to the budget (it keeps what was freed
        until checkpointed, and a small budget would be passed by the log alone)."""
        budget = self.archive.kv_budget.get().bytes
        wal = file_sizes(self.archive.db_path)[1]
        if dropped or (budget is not None and wal > budget // WAL_SHARE):
            self.give_back()

    def give_back(self) -> None:
        """Return the file's free pages to the file system and truncate the write-ahead
        log; a reader elsewhere holding an old snapshot only delays the log's part."""
        if self.conn.execute("PRAGMA freelist_count").fetchone()[0]:
            # Stepped to its end (execute() would free one page a call).
            self.conn.executescript("PRAGMA incremental_vacuum;")
        self.checkpoint()

    def checkpoint(self) -> bool:
        """Checkpoint and truncate the log, without waiting for other processes' readers
        (the next checkpoint finishes what this one could not); whether it was whole.
        Not while Litestream replicates the archive: it checkpoints then (see replication)."""
        if is_replicated(self.archive.db_path):
            return False
        timeout = self.conn.execute("PRAGMA busy_timeout").fetchone()[0]
        self.conn.execute("PRAGMA busy_timeout = 0")
        try:
            busy, _, _ = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            return busy == 0
        except dbapi.OperationalError:   # busy: another process is checkpointing
            return False
        finally:
            self.conn.execute(f"PRAGMA busy_timeout = {int(timeout)}")

    def file_bytes(self) -> int:
        return sum(file_sizes(self.archive.db_path))
