"""Computing and storing the KV of conversations that have none, several per forward pass.

An imported history (a ChatGPT export, say) has messages but no KV: the
first turn of each old chat would read it whole. Warming reads each
conversation's current path once, up to its head, with several paths
sharing every forward pass (a sequence each, as the server's slots), and
stores the KV rows as the console does, so that any of them then resumes
at once. Paths longer than the context are left out (the console reads
them through a window).
"""

from dataclasses import dataclass, field

import numpy as np

from ..llama.batch import MultiBatch
from ..prompt.path_tokens import PathTokens


@dataclass
class WarmReport:
    warmed: list[int] = field(default_factory=list)        # conversation ids
    already: list[int] = field(default_factory=list)       # KV stored up to the head
    too_long: list[int] = field(default_factory=list)      # or not exactly tokenizable
    over_budget: list[int] = field(default_factory=list)   # left: their KV would pass the budget
    budget_bytes: "int | None" = None
    computed_tokens: int = 0
    restored_tokens: int = 0
    most_sequences: int = 0      # the most sequences one forward pass held


@dataclass
class _Job:
    conv_id: int
    tokens: PathTokens
    cache: object = None      # KVCache of the sequence reading it
    pending: np.ndarray = None
    used_at: "str | None" = None   # when the conversation was last used: its KV's recency


class Warmer:
    """Warms conversations with one sequence per cache of `caches` (of one engine)."""

    def __init__(self, engine, caches: list):
        self.engine, self.caches = engine, caches

    def warm(self, conv_ids: list[int], progress=None) -> WarmReport:
        """progress(done, total) counts the tokens of the paths to read."""
        report, jobs = WarmReport(), []
        archive = self.engine.archive
        budget = archive.kv_budget.get().bytes
        room = None if budget is None else budget - archive.kv_keeping.stored_bytes()
        report.budget_bytes = budget
        per_token = self._stored_per_token()
        for conv_id in sorted(conv_ids, key=self._last_used, reverse=True):
            tokens = self._needing(conv_id)
            if tokens is None:
                report.already.append(conv_id)
            elif not tokens.stable or sum(tokens.lengths) > self.engine.model.n_ctx - 1:
                report.too_long.append(conv_id)
            elif report.over_budget or (room is not None and sum(tokens.lengths) * per_token > room):
                report.over_budget.append(conv_id)   # and every older one: warming stops here
            else:
                jobs.append(_Job(conv_id, tokens, used_at=self._last_used(conv_id)))
                room = None if room is None else room - sum(tokens.lengths) * per_token
        total = sum(sum(job.tokens.lengths) for job in jobs)
        if progress:
            progress(0, total)
        batch = MultiBatch(self.engine.model, self.engine.model.config.n_batch)
        try:
            self._run(jobs, batch, report, total, progress)
            report.most_sequences = batch.most_sequences
        finally:
            batch.close()
            self.engine.flush()   # the KV is in the archive when warm() returns
        return report

    def _last_used(self, conv_id: int) -> str:
        return self.engine.archive.conversation(conv_id).updated_at

    def _stored_per_token(self) -> float:
        """Bytes a token's KV takes stored: as compressed so far under the engine's
        fingerprint, else the raw size (what the budget check must not underestimate)."""
        layout = self.engine.layout
        raw = layout.row_bytes_per_token if layout is not None else 0
        usage = self.engine.archive.kv.usage(self.engine.fingerprint)
        tokens = self.engine.archive.kv.stored_tokens(self.engine.fingerprint)
        return usage.stored_bytes / tokens if tokens else float(raw)

    def _needing(self, conv_id: int) -> "PathTokens | None":
        """The path tokens of a conversation whose head has no stored KV, else None."""
        engine = self.engine
        head = engine.archive.conversation(conv_id).head_id
        if head is None:
            return None
        stored = engine.archive.kv.deepest_restorable(head, engine.fingerprint)
        if stored is not None and stored.message_id == head:
            return None
        return engine.prompts.path_tokens(engine.archive.path(head))

    def _run(self, jobs: list[_Job], batch: MultiBatch, report: WarmReport, total, progress):
        waiting, running, free, done = list(reversed(jobs)), [], list(self.caches), 0
        while waiting or running:
            while waiting and free:
                job = waiting.pop()
                job.cache = free.pop()
                flat = job.tokens.flat()
                restored = job.cache.restore(flat, job.tokens, limit=len(flat))
                report.restored_tokens += restored.restored_tokens
                done += restored.restored_tokens
                job.pending = flat[restored.restored_tokens:]
                running.append(job)
            fed = []
            for job in running:
                if batch.room == 0:
                    break
                part = job.pending[:batch.room]
                if len(part):
                    batch.add(job.cache.seq.seq_id, part.tolist(), len(job.cache.seq.tokens), False)
                    fed.append((job, part))
            batch.decode()
            for job, part in fed:
                job.cache.mark_decoded(part.tolist())
                job.pending = job.pending[len(part):]
                report.computed_tokens += len(part)
                done += len(part)
            for job in [j for j in running if not len(j.pending)]:
                if self.engine.store_path_kv(job.tokens, job.cache, used_at=job.used_at):
                    report.warmed.append(job.conv_id)
                running.remove(job)
                free.append(job.cache)
            if progress:
                progress(done, total)
