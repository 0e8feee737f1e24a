"""Embedding the messages that have no vectors yet: the backlog, or what is new.

    report = Indexer(archive, embedder).run(progress=bar.update)

Messages are read newest first, BATCH at a time; each batch's vectors are
committed in one transaction, so a stop at any point (Ctrl-C, kill -9)
keeps every batch before it, and the next run carries on with the messages
still without vectors. A message deleted meanwhile is skipped.
"""

import time
from dataclasses import dataclass

from chatdb.search.vectors import VectorStore

BATCH = 32  # messages per transaction (their chunks share forward passes)


@dataclass
class IndexReport:
    model: str
    embedded: int = 0      # messages embedded now
    chunks: int = 0        # vectors stored now
    already: int = 0       # messages that had vectors before
    seconds: float = 0.0

    @property
    def per_second(self) -> float:
        return self.embedded / self.seconds if self.seconds else 0.0


class Indexer:
    def __init__(self, archive, embedder):
        self.archive, self.embedder = archive, embedder
        self.store = VectorStore(archive.conn)
        self.report: "IndexReport | None" = None   # of the run under way, or the last one

    @staticmethod
    def floor(archive) -> int:
        """The newest message id now: what a background indexer leaves to `chatdb index`."""
        return VectorStore(archive.conn).last_message_id()

    def model_id(self) -> int:
        """The id of the model's index, made at its first vectors (a write only then)."""
        known = self.store.model_id(self.embedder.fingerprint)
        if known is not None:
            return known
        with self.archive.transaction():
            return self.store.add_model(self.embedder.fingerprint, self.embedder.name,
                                        self.embedder.dims)

    def run(self, progress=None, after: int = 0, cancelled=None) -> IndexReport:
        """Embed every message after id `after` that has no vectors; progress(done, total)."""
        started = time.perf_counter()
        model_id = self.model_id()
        total = self.store.count_unindexed(model_id, after)
        report = self.report = IndexReport(
            self.embedder.name, already=self.archive.count_messages() - total if not after else 0)
        before = None
        if progress:
            progress(0, total)
        while not (cancelled and cancelled()):
            batch = self.store.unindexed(model_id, BATCH, before=before, after=after)
            if not batch:
                break
            before = batch[-1][0]
            report.chunks += self._store(model_id, self.embedder.embed_messages(batch))
            report.embedded += len(batch)
            report.seconds = time.perf_counter() - started
            if progress:
                progress(min(report.embedded, total), total)
        report.seconds = time.perf_counter() - started
        return report

    def _store(self, model_id: int, embedded) -> int:
        stored = 0
        with self.archive.transaction():
            for message in embedded:
                if self.store.put(model_id, message.message_id, message.starts, message.vectors):
                    stored += len(message.starts)
        return stored
