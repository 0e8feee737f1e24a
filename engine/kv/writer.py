"""Storing KV segments off the critical path.

The engine hands over one state (llama.cpp's bytes, already copied out of
the context) and the token ranges of the messages to keep; a thread with its
own database connection cuts, compresses and writes them while the user
reads the answer. `flush()` waits for all of it (the engine calls it before
the process exits).

Before each segment is written, room is made for it under the archive's KV
budget (chatdb.kv.keeping: what is worth least goes, never the path being
stored); a path larger than the budget keeps the KV of its first messages,
said once. After the store, the path counts as used (what dropping goes
by), and the disk that drops freed goes back.

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

from chatdb.archive import Archive
from chatdb.kv.budget import format_size
from chatdb.kv.eviction import DEFAULT_SPAN
from chatdb.kv.store import encode

from ..state import kvlayout
from . import row_sharing
from .modes import KVSource

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
    used_at: "str | None" = None   # when the path was used (None: now; warming: the chat's last use)
    # (tokens restored from the archive, tokens before the turn): the turn reopened the chat
    reopened: "tuple[int, int] | None" = None


class KVWriter:
    def __init__(self, db_path, on_error=None, max_waiting: int = MAX_WAITING, on_note=None,
                 span: int = DEFAULT_SPAN):
        """`on_note(text)` hears what the budget kept from being stored (once);
        `span`: the model's, for what dropping saves (chatdb.kv.eviction)."""
        self.db_path = db_path
        self.on_error = on_error or (lambda exc: None)
        self.on_note = on_note or (lambda text: None)
        self.span = span
        self.jobs: queue.Queue = queue.Queue(maxsize=max_waiting)
        self.stored_bytes = 0
        self.stored_segments = 0
        self._reported: set[str] = set()
        self._noted: set[str] = set()
        self._dropped = 0   # segments the job being stored dropped to make room
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

    def _note(self, text: str) -> None:
        """Tell the caller once per process what the budget kept out."""
        key = text.split(":")[0]
        if key not in self._noted:
            self._noted.add(key)
            try:
                self.on_note(text)
            except Exception:
                sys.stderr.write(f"chatdb: {text}\n")

    def _store(self, archive: Archive, job: StoreJob) -> None:
        self._dropped = 0
        if job.kind == "snapshot":
            self._store_snapshots(archive, job, [(job.ranges[-1][0], job.state)])
        else:
            self._store_rows(archive, job)
        self._used(archive, job)
        archive.kv_keeping.after_store(self._dropped)

    def _store_rows(self, archive: Archive, job: StoreJob) -> None:
        layout = kvlayout.parse(job.state, job.window)
        at, early = job.earlier or (-1, None)
        early_layout = kvlayout.parse(early, job.window) if early is not None else None
        todo = [r for r in job.ranges if not archive.kv.has(r[0], job.fingerprint, job.kind)]
        above = {r[0]: q[0] for q, r in zip(job.ranges, job.ranges[1:])}
        for i, (message_id, start, stop) in enumerate(todo):
            raw = (kvlayout.cut(early, early_layout, start, stop) if stop <= at
                   else kvlayout.cut(job.state, layout, start, stop))
            n = int(stop - start)
            sharing = row_sharing.plan_sharing(archive, job.fingerprint, layout, message_id, raw, n,
                                                job.plane_width)
            size = row_sharing.size(sharing)
            # Room for the rest of the path too, guessed from this message's ratio: one drop
            # usually makes room for a whole path.
            rest = sum(b - a for _, a, b in todo[i + 1:]) * size // max(1, n)
            with archive.transaction():
                if not archive.has_message(message_id):
                    continue  # deleted meanwhile
                if message_id in above and not archive.kv.has(above[message_id], job.fingerprint, "rows"):
                    break   # another process dropped the rows above since: these could not restore
                if not self._room(archive, job, size, rest):
                    break   # the rest of the path waits on this message's rows
                self.stored_bytes += row_sharing.store(archive, job.fingerprint, message_id, n, sharing)
            self.stored_segments += 1
        if job.checkpoints:   # only where the rows reach: a checkpoint restores only with them
            self._store_snapshots(archive, job, [(m, s) for m, s in job.checkpoints
                                                 if archive.kv.has(m, job.fingerprint, "rows")])

    def _room(self, archive: Archive, job: StoreJob, size: int, rest: int = 0) -> bool:
        """Make room under the budget for `size` bytes (and `rest` more if it can), inside
        the store's transaction; whether `size` fits. Said once where it does not."""
        protect = {message_id for message_id, _, _ in job.ranges}
        room = archive.kv_keeping.make_room(size + rest, protect, self.span)
        self._dropped += room.dropped
        if room.fits(size):
            return True
        budget = archive.kv_budget.get()
        if not budget.bytes:
            self._note("the KV budget is 0: no KV state is kept, every turn reads its chat again "
                       "(`chatdb kv budget SIZE` sets one)")
        else:
            self._note(f"the KV budget ({format_size(budget.bytes)}) is smaller than this chat's KV: "
                       "only its first messages' is kept, and the rest is read again when "
                       "needed (`chatdb kv budget SIZE` sets a larger one)")
        return False

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
            if not self._room(archive, job, sum(len(e.blob) for _, e in encoded)):
                # The head's alone, if that fits: it is what the next turn restores.
                encoded = encoded[-1:] if self._room(archive, job, len(encoded[-1][1].blob)) else []
            for message_id, blob in encoded:
                self.stored_bytes += archive.kv.put_encoded(
                    message_id, job.fingerprint, "snapshot", int(stops[message_id]), blob)
            superseded = archive.kv.superseded_snapshots(head, job.fingerprint)
            for old in superseded_by(job.ranges, superseded, job.checkpoint_tokens):
                archive.kv.delete(old, job.fingerprint, "snapshot")
        self.stored_segments += len(encoded)

    def _used(self, archive: Archive, job: StoreJob) -> None:
        """The path counts as used now (or when the job says), and a reopening is counted."""
        head = job.ranges[-1][0]
        with archive.transaction():
            if not archive.has_message(head):
                return
            archive.kv_keeping.record_use(job.fingerprint, head, job.used_at)
            if job.reopened is not None:
                archive.kv_keeping.record_reopening(*job.reopened)


def reopening(source: KVSource, restored_tokens: int, prepared) -> "tuple[int, int] | None":
    """(tokens restored from the archive, tokens the chat had before the message answered),
    where a turn reopened a chat (found it neither in the context nor in memory) that had
    an answer before: how well the archive keeps what is come back to."""
    if source not in (KVSource.ARCHIVE, KVSource.NONE) or not any(m.role == "assistant"
                                                                  for m in prepared.path[:-1]):
        return None
    ends = prepared.window.tokens.ends()
    before = ends[-2] if len(ends) > 1 else 0
    return restored_tokens, max(before, restored_tokens)


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
