"""Storing KV segments off the critical path.

The engine hands over one state (llama.cpp's bytes, already copied out of
the context) and the token ranges of the messages to keep; a thread with its
own database connection cuts, compresses and writes them while the user
reads the answer. `flush()` waits for all of it (the engine calls it before
the process exits).

Whatever fails in the thread (opening the archive, a store, the error
callback itself) costs only a later recompute: the thread keeps draining
its queue, so `flush()` and `close()` always return, and each distinct
error is reported once. At most `max_waiting` states wait in the queue
(each is a whole copy of the context's KV): `submit` waits for room.
"""

import queue
import sys
import threading
from dataclasses import dataclass

from chatdb.kv.store import encode
from chatdb.archive import Archive

from ..state import kvlayout
from . import row_sharing

MAX_WAITING = 2   # whole states queued behind the one being stored


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
    # (message_id, state) stored whole beside the rows: a hybrid's recurrent part at
    # those messages' ends, kept as snapshots are (archive_checkpoints.py)
    checkpoints: tuple = ()


class KVWriter:
    def __init__(self, db_path, on_error=None, max_waiting: int = MAX_WAITING):
        self.db_path = db_path
        self.on_error = on_error or (lambda exc: None)
        self.jobs: queue.Queue = queue.Queue(maxsize=max_waiting)
        self.stored_bytes = 0
        self.stored_segments = 0
        self._reported: set[str] = set()
        self._thread = threading.Thread(target=self._run, name="chatdb-kv-writer", daemon=True)
        self._thread.start()

    def submit(self, job: StoreJob) -> None:
        """Queue a state; waits while `max_waiting` others wait (bounded memory)."""
        while self._thread.is_alive():
            try:
                self.jobs.put(job, timeout=1.0)
                return
            except queue.Full:
                continue
        self._report(RuntimeError("the KV writer has stopped"))

    def waiting(self) -> int:
        """States queued and not yet taken by the thread."""
        return self.jobs.qsize()

    def flush(self) -> None:
        """Wait until every submitted state is stored (or failed)."""
        with self.jobs.all_tasks_done:
            while self.jobs.unfinished_tasks and self._thread.is_alive():
                self.jobs.all_tasks_done.wait(timeout=1.0)

    def close(self) -> None:
        self.flush()
        if self._thread.is_alive():
            self.jobs.put(None)
            self._thread.join()

    def _run(self) -> None:
        archive = None
        try:
            archive = Archive.open(self.db_path)
        except Exception as exc:  # every job is then dropped (and reported once)
            self._report(exc)
        job = None
        try:
            while (job := self.jobs.get()) is not None:
                try:
                    if archive is not None:
                        self._store(archive, job)
                except Exception as exc:  # a failed store only costs a later recompute
                    self._report(exc)
                finally:
                    self.jobs.task_done()
        finally:
            if archive is not None:
                archive.close()
            if job is None:  # the sentinel close() sent
                self.jobs.task_done()

    def _report(self, exc: Exception) -> None:
        """Tell the caller once per distinct error; a failing callback must not stop the thread."""
        key = f"{type(exc).__name__}: {exc}"
        if key in self._reported:
            return
        self._reported.add(key)
        try:
            self.on_error(exc)
        except Exception:
            sys.stderr.write(f"chatdb: warning: KV not stored: {exc}\n")

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
            n = int(stop - start)
            plan = row_sharing.plan(archive, job.fingerprint, layout, message_id, raw, n, job.plane_width)
            with archive.transaction():
                if not archive.has_message(message_id):
                    continue  # deleted meanwhile
                self.stored_bytes += row_sharing.store(archive, job.fingerprint, message_id, n, plan)
            self.stored_segments += 1
        if job.checkpoints:
            self._store_snapshots(archive, job, job.checkpoints)

    def _store_snapshot(self, archive: Archive, job: StoreJob) -> None:
        """The whole state, at the path's last message."""
        self._store_snapshots(archive, job, [(job.ranges[-1][0], job.state)])

    def _store_snapshots(self, archive: Archive, job: StoreJob, states) -> None:
        """Snapshots (message_id, state) of the path, the last at its end; in the same
        transaction, the snapshots above it that these supersede are deleted."""
        stops = {message_id: stop for message_id, _, stop in job.ranges}
        head = job.ranges[-1][0]
        encoded = [(m, encode(state, 1)) for m, state in states
                   if not archive.kv.has(m, job.fingerprint, "snapshot")]
        if not encoded:
            return
        with archive.transaction():
            if not archive.has_message(head):
                return  # deleted meanwhile
            for message_id, blob in encoded:
                self.stored_bytes += archive.kv.put_encoded(
                    message_id, job.fingerprint, "snapshot", int(stops[message_id]), blob)
            superseded = archive.kv.superseded_snapshots(head, job.fingerprint)
            for old in superseded_by(job.ranges, superseded, job.checkpoint_tokens):
                archive.kv.delete(old, job.fingerprint, "snapshot")
        self.stored_segments += len(encoded)


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
