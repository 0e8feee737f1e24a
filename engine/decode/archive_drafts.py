"""The engine's archive drafting: its index of every answer, loaded at first use and kept
current, and a drafter for each answer (archive_drafter.py).

The index is read from its file beside the archive, or built there, the
first time an answer drafts from the archive (not when the engine opens);
before each answer, what was written or deleted since is read into it (one
query each when nothing was). It is written back when a good part of it is
new. It holds tokens only, never KV: a smaller KV budget leaves it alone.

Where many arrays are still to be read (a first use on a large archive: some
tens of seconds at a million answers), they are read on a thread of their
own, with its own connection; answers meanwhile draft from their related
answers only, and the index joins once it is built.
"""

import threading
import time

from chatdb.archive import Archive
from chatdb.storage import dbapi

from .archive_drafter import ArchiveDrafter
from .archive_index import ArchiveIndex

RELATED = 16   # related answers an answer drafts from, nearest first
AT_ONCE = 20_000   # arrays read before an answer starts; more are read on a thread (~1 s)


class ArchiveDrafts:
    def __init__(self, archive: Archive, tokenizer: str, budget_bytes: int = 64 << 20,
                 warn=None):
        self.archive, self.tokenizer, self.budget, self.warn = archive, tokenizer, budget_bytes, warn
        self.index: "ArchiveIndex | None" = None
        self.building: "threading.Thread | None" = None
        self.built: "ArchiveIndex | None" = None   # by the thread, to be taken
        self.load_ms = 0.0     # the first use's: read from the file or built
        self.loaded_from = ""  # "file", "built" or "built aside"

    def current(self) -> "ArchiveIndex | None":
        """The index, with what was written and deleted up to now (None: being built)."""
        if self.index is None and not self._first_use():
            return None
        self.index.refresh(self.archive.token_sources)
        if self._file() is not None and self.index.worth_saving():
            self._save()
        return self.index

    def _first_use(self) -> bool:
        """Load or build the index; False while a thread builds it."""
        if self.building is not None:
            if self.building.is_alive():
                return False
            self.building, self.index = None, self.built
            return self.index is not None
        started = time.perf_counter()
        index = ArchiveIndex(self.tokenizer, self.budget)
        self.loaded_from = "file" if self._file() and index.load(self._file()) else "built"
        left = self.archive.token_sources.count_after(self.tokenizer, index.last_id)
        if left > AT_ONCE and self.archive.db_path is not None and self._file() is not None:
            self.loaded_from = "built aside"
            self.building = threading.Thread(target=self._build, args=(index, started),
                                             name="chatdb-draft-index", daemon=True)
            self.building.start()
            return False
        index.refresh(self.archive.token_sources)
        self.index, self.load_ms = index, (time.perf_counter() - started) * 1000
        return True

    def _build(self, index: ArchiveIndex, started: float) -> None:
        try:
            with Archive.open(self.archive.db_path) as archive:
                index.refresh(archive.token_sources)
            index.save(self._file())
            self.built, self.load_ms = index, (time.perf_counter() - started) * 1000
        except Exception:   # drafting goes on from related answers; the next engine tries again
            self.built = None

    def wait(self) -> None:
        """Let a build under way finish (closing, and tests)."""
        if self.building is not None:
            self.building.join()

    def drafter(self, conversation_id: "int | None", message_id: "int | None") -> ArchiveDrafter:
        """A drafter for the answer to `message_id` (None: a completion, outside the tree).
        An archive that cannot be read now (a damaged page, say) gives no guesses; the
        answer goes on without them."""
        try:
            index = self.current()   # None while it is built
            related = ([] if message_id is None else
                       self.archive.token_sources.related(message_id, conversation_id,
                                                          self.tokenizer, RELATED, 1 << 15))
        except (*dbapi.Error, OSError) as exc:   # either driver's (an encrypted archive)
            if self.warn is not None:
                self.warn(f"no guesses from the archive for this answer: {exc}")
            index, related = None, []
        return ArchiveDrafter(related, index, self.archive.token_sources, self.tokenizer)

    def describe(self) -> dict:
        index = self.index
        if index is None:
            return {"loaded": False, "building": self.building is not None}
        return {"loaded": True, "from": self.loaded_from, "load_ms": round(self.load_ms, 1),
                "answers": int((index.ids != 0).sum()), "tokens": index.total,
                "anchors": index.anchors, "bytes": index.nbytes, "shift": index.shift}

    def _file(self):
        path = self.archive.db_path
        if path is None or str(path) == ":memory:" or self.archive.read_only:
            return None
        return ArchiveIndex.file_for(path, self.tokenizer)

    def _save(self) -> None:
        try:
            self.index.save(self._file())
            with self.archive.transaction():
                self.archive.token_sources.prune_log()
        except OSError as exc:   # a full disk: the index is rebuilt next time, nothing lost
            if self.warn is not None:
                self.warn(f"the archive's draft index is not saved: {exc}")
