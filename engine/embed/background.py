"""Messages embedded as they are stored, on a thread of their own, off every turn's path.

    indexer = BackgroundIndexer(db_path, embed_path)   # a thread with its own connection
    indexer.poke()                                      # something was written: look now
    indexer.close()                                     # embed what is left, then stop

The thread looks for messages without vectors written after it started (the
backlog of older ones is `chatdb index`'s), when poked and every `poll`
seconds; after embedding them it merges the full-text index when it has grown
into many segments (chatdb.search.index_upkeep). It runs on one thread at a
lower CPU priority (nice 5: about a quarter of a core's time where a turn
decoding meanwhile wants it, all of it when the cores are free, as while an
answer is read; the lowest priority, 19, left it starved for minutes on a busy
machine); the model loads when there is a first message to embed. Whatever
fails (a read-only archive, a broken model) is reported once and stops only
the indexing.
"""

import os
import threading

from chatdb.archive import Archive

from .embedder import Embedder
from .indexer import Indexer

POLL_S = 1.0
NICE = 5


class BackgroundIndexer:
    def __init__(self, db_path, embed_path, on_error=None, poll: float = POLL_S):
        self.db_path, self.embed_path = db_path, str(embed_path)
        self.on_error = on_error or (lambda exc: None)
        self.poll = poll
        self.embedded = 0
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._stop = False
        self._after: "int | None" = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chatdb-indexer", daemon=True)
        self._thread.start()
        self._started.wait()

    def poke(self) -> None:
        self._idle.clear()
        self._wake.set()

    def flush(self, timeout: "float | None" = None) -> bool:
        """Wait until what was written before this call is embedded (True) or `timeout`."""
        if not self._thread.is_alive():
            return True
        self.poke()
        return self._idle.wait(timeout)

    def close(self) -> None:
        """Embed what is still without vectors, then stop the thread."""
        if self._thread.is_alive():
            self._stop = True
            self.poke()
            self._thread.join()

    def _run(self) -> None:
        _lower_priority()
        archive = embedder = None
        try:
            archive = Archive.open(self.db_path)
            self._after = Indexer.floor(archive)
        except Exception as exc:
            self._report(exc)
            self._started.set()
            self._idle.set()
            return
        self._started.set()
        seen = None
        try:
            while True:
                self._wake.wait(self.poll)
                self._wake.clear()
                # what was written since it started: it looks again only when that changes
                written = archive.written_after(self._after)
                if written != seen and written[0]:  # new messages: embed them
                    if embedder is None:
                        embedder = Embedder.open(archive, self.embed_path)
                    self.embedded += Indexer(archive, embedder).run(after=self._after).embedded
                    seen = written
                    # the text index too, now and then (rarely more than a check)
                    archive.merge_text_index(stop=lambda: self._stop)
                if not self._wake.is_set():
                    self._idle.set()
                if self._stop:
                    break
        except Exception as exc:  # costs only the indexing: `chatdb index` catches up later
            self._report(exc)
        finally:
            self._idle.set()
            if embedder is not None:
                embedder.close()
            archive.close()

    def _report(self, exc: Exception) -> None:
        try:
            self.on_error(exc)
        except Exception:
            pass


def _lower_priority() -> None:
    """This thread (and the llama.cpp workers it would start) at a lower priority: on
    Linux a thread's nice value is its own."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(),
                       max(NICE, os.getpriority(os.PRIO_PROCESS, 0)))
    except (AttributeError, OSError):
        pass
