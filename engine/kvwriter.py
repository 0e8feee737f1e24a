"""Storing KV segments off the critical path.

The engine hands over one state (llama.cpp's bytes, already copied out of
the context) and the token ranges of the messages to keep; a thread with its
own database connection cuts, compresses and writes them while the user
reads the answer. `flush()` waits for all of it (the engine calls it before
the process exits).
"""

import queue
import threading
from dataclasses import dataclass

from chatdb import kv
from chatdb.archive import Archive

from . import kvlayout


@dataclass(frozen=True)
class StoreJob:
    state: memoryview
    fingerprint: str
    ranges: list          # (message_id, start, stop): rows, or a snapshot of [0, stop)
    kind: str = "rows"
    plane_width: int = 2
    window: "int | None" = None   # sliding-window size of an iSWA state (kvlayout.parse)
    # (tokens, state) from earlier in the turn: messages ending there are cut from it,
    # since it still holds their last window of sliding-window rows
    earlier: "tuple[int, memoryview] | None" = None
    checkpoint_tokens: int = 2048  # snapshots: keep one per this many tokens along a path


class KVWriter:
    def __init__(self, db_path, on_error=None):
        self.db_path = db_path
        self.on_error = on_error or (lambda exc: None)
        self.jobs: queue.Queue = queue.Queue()
        self.stored_bytes = 0
        self.stored_segments = 0
        self._thread = threading.Thread(target=self._run, name="chatdb-kv-writer", daemon=True)
        self._thread.start()

    def submit(self, job: StoreJob) -> None:
        self.jobs.put(job)

    def flush(self) -> None:
        self.jobs.join()

    def close(self) -> None:
        self.flush()
        self.jobs.put(None)
        self._thread.join()

    def _run(self) -> None:
        archive = Archive.open(self.db_path)
        try:
            while (job := self.jobs.get()) is not None:
                try:
                    self._store(archive, job)
                except Exception as exc:  # a failed store only costs a later recompute
                    self.on_error(exc)
                finally:
                    self.jobs.task_done()
        finally:
            archive.close()
            self.jobs.task_done()

    def _store(self, archive: Archive, job: StoreJob) -> None:
        if job.kind == "snapshot":
            return self._store_snapshot(archive, job)
        layout = kvlayout.parse(job.state, job.window)
        at, early = job.earlier or (-1, None)
        early_layout = kvlayout.parse(early, job.window) if early is not None else None
        for message_id, start, stop in job.ranges:
            if archive.kv.has(message_id, job.fingerprint, job.kind):
                continue
            raw = (kvlayout.cut(early, early_layout, start, stop) if stop <= at
                   else kvlayout.cut(job.state, layout, start, stop))
            encoded = kv.encode(raw, job.plane_width)
            with archive.transaction():
                if not archive.has_message(message_id):
                    continue  # deleted meanwhile
                self.stored_bytes += archive.kv.put_encoded(
                    message_id, job.fingerprint, job.kind, int(stop - start), encoded)
            self.stored_segments += 1

    def _store_snapshot(self, archive: Archive, job: StoreJob) -> None:
        """The whole state at the path's last message; in the same transaction, the
        snapshots above it that this one supersedes are deleted (see checkpoints)."""
        message_id, _, stop = job.ranges[-1]
        if archive.kv.has(message_id, job.fingerprint, "snapshot"):
            return
        encoded = kv.encode(job.state, 1)
        with archive.transaction():
            if not archive.has_message(message_id):
                return  # deleted meanwhile
            self.stored_bytes += archive.kv.put_encoded(
                message_id, job.fingerprint, "snapshot", int(stop), encoded)
            superseded = archive.kv.superseded_snapshots(message_id, job.fingerprint)
            for old in superseded_by(job.ranges, superseded, job.checkpoint_tokens):
                archive.kv.delete(old, job.fingerprint, "snapshot")
        self.stored_segments += 1


def superseded_by(ranges, candidates: list[int], every: int) -> list[int]:
    """Of the snapshots `candidates` above the path's last message (ranges:
    message_id, start, stop in path order), those to delete: all but the
    deepest in each stretch of `every` tokens, and all in the new one's own
    stretch. What is kept bounds how much a restore anywhere recomputes."""
    stops = {message_id: stop for message_id, _, stop in ranges}
    newest = {stops[ranges[-1][0]] // every: ranges[-1][0]}
    for message_id in sorted(candidates, key=lambda m: stops[m], reverse=True):
        newest.setdefault(stops[message_id] // every, message_id)
    kept = set(newest.values())
    return [m for m in candidates if m not in kept]
