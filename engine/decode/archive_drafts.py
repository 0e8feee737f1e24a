"""The engine's archive drafting: its index of every answer, loaded at first use and kept
current, and a drafter for each answer (archive_drafter.py).

The index is read from its file beside the archive, or built there, the
first time an answer drafts from the archive (not when the engine opens);
before each answer, what was written or deleted since is read into it (one
query each when nothing was). It is written back when a good part of it is
new. It holds tokens only, never KV: a smaller KV budget leaves it alone.
"""

import time

from chatdb.archive import Archive

from .archive_drafter import ArchiveDrafter
from .archive_index import ArchiveIndex

RELATED = 16   # related answers an answer drafts from, nearest first


class ArchiveDrafts:
    def __init__(self, archive: Archive, tokenizer: str, budget_bytes: int = 64 << 20,
                 warn=None):
        self.archive, self.tokenizer, self.budget, self.warn = archive, tokenizer, budget_bytes, warn
        self.index: "ArchiveIndex | None" = None
        self.load_ms = 0.0     # the first use's: read from the file or built
        self.loaded_from = ""  # "file" or "built"

    def current(self) -> ArchiveIndex:
        """The index, with what was written and deleted up to now."""
        started = time.perf_counter()
        first = self.index is None
        if first:
            self.index = ArchiveIndex(self.tokenizer, self.budget)
            self.loaded_from = "file" if self._file() and self.index.load(self._file()) else "built"
        sources = self.archive.token_sources
        self.index.refresh(sources)
        if first:
            self.load_ms = (time.perf_counter() - started) * 1000
        if self._file() is not None and self.index.worth_saving():
            self._save()
        return self.index

    def drafter(self, conversation_id: "int | None", message_id: "int | None") -> ArchiveDrafter:
        """A drafter for the answer to `message_id` (None: a completion, outside the tree)."""
        index = self.current()
        related = ([] if message_id is None else
                   self.archive.token_sources.related(message_id, conversation_id,
                                                      self.tokenizer, RELATED, 1 << 15))
        return ArchiveDrafter(related, index, self.archive.token_sources, self.tokenizer)

    def describe(self) -> dict:
        index = self.index
        if index is None:
            return {"loaded": False}
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
