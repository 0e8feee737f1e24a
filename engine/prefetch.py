"""Restoring a conversation's KV ahead of its next turn, while the user types.

The console starts this as a conversation opens; the turn that follows then
computes only the new message. The thread reads through its own archive
connection and holds the model until it is done: the engine waits for it
(`wait`) before it touches the model again. Warnings raised meanwhile are
handed over by `wait`, on the caller's thread.
"""

import threading

from chatdb.archive import Archive


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
