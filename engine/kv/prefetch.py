"""Getting a conversation's KV ready ahead of its next turn.

Prefetch: the console restores a conversation as it opens, while the user
types; the turn that follows then computes only the new message. The thread
reads through its own archive connection and holds the model until it is
done: the engine waits for it (`wait`) before it touches the model again.
Warnings raised meanwhile are handed over by `wait`, on the caller's thread.

EarlyRead: `ask` knows the conversation before the model is loaded, so the
segments are read and decompressed meanwhile; placing them into a state
needs the model, and waits for the turn.
"""

import threading
from concurrent.futures import Future

import numpy as np

from chatdb.archive import Archive

from ..state.segment_assembly import decoder_pool


class Prefetch:
    def __init__(self):
        self._thread: "threading.Thread | None" = None
        self._warnings: list[str] = []

    def start(self, db_path, work) -> None:
        """Run work(archive, warn) on a thread with its own connection to `db_path`."""
        self._thread = threading.Thread(target=self._run, args=(db_path, work),
                                        name="chatdb-kv-prefetch", daemon=True)
        self._thread.start()

    def wait(self, warn) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        for message in self._warnings:
            warn(message)
        self._warnings.clear()

    def _run(self, db_path, work) -> None:
        try:
            with Archive.open(db_path) as archive:
                work(archive, self._warnings.append)
        except Exception as exc:  # only a head start is lost: the turn restores as usual
            self._warnings.append(f"KV not restored ahead of time: {exc}")


class EarlyRead:
    """Decompressing the KV segments along a message's path, on the decoder pool."""

    def __init__(self, db_path, message_id: int, fingerprints: "list[str]"):
        self.fingerprint: "str | None" = None   # the first of `fingerprints` the message has KV under
        self.decoded: "dict[int, Future]" = {}   # message id -> its checked bytes, as one plane
        self._thread = threading.Thread(target=self._run, args=(db_path, message_id, fingerprints),
                                        name="chatdb-kv-early", daemon=True)
        self._thread.start()

    def _run(self, db_path, message_id: int, fingerprints: "list[str]") -> None:
        try:
            with Archive.open(db_path) as archive:
                stored = archive.kv.fingerprints_for(message_id)
                self.fingerprint = next((fp for fp in fingerprints if fp in stored), None)
                if self.fingerprint is None:
                    return
                for ref in archive.kv.rows_index(message_id, self.fingerprint):
                    segment = archive.kv.get(ref.message_id, self.fingerprint)
                    if segment is not None:
                        self.decoded[ref.message_id] = decoder_pool().submit(_interleaved, segment)
        except Exception:  # only a head start is lost: the turn reads the archive as usual
            self.decoded = {}

    def take(self, fingerprint: str) -> "dict[int, Future]":
        """The decoded segments, if they were read under the engine's actual fingerprint."""
        self._thread.join()
        return self.decoded if self.fingerprint is not None and fingerprint == self.fingerprint else {}


def _interleaved(segment) -> np.ndarray:
    """The raw bytes as one plane: interleaving now leaves the turn a plain copy."""
    return np.frombuffer(segment.decode(), np.uint8).reshape(1, -1)
