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
        layout = kvlayout.parse(job.state) if job.kind == "rows" else None
        for message_id, start, stop in job.ranges:
            if archive.kv.has(message_id, job.fingerprint, job.kind):
                continue
            raw = kvlayout.cut(job.state, layout, start, stop) if layout else job.state
            encoded = kv.encode(raw, job.plane_width)
            with archive.transaction():
                if not archive.has_message(message_id):
                    continue  # deleted meanwhile
                self.stored_bytes += archive.kv.put_encoded(
                    message_id, job.fingerprint, job.kind, int(stop - start), encoded)
            self.stored_segments += 1
