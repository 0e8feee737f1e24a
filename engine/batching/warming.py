"""Computing and storing the KV of conversations that have none, several per forward pass.

An imported history (a ChatGPT export, say) has messages but no KV: the
first turn of each old chat would read it whole. Warming reads each
conversation's current path once, up to its head, as jobs of the slots
(scheduler.py) that stop after reading their prompt: several paths share
every forward pass, a sequence each, and each path's KV rows are stored as
the console stores them, so that any of them then resumes at once. Paths
longer than the context are left out (the console reads them through a
window).
"""

from dataclasses import dataclass, field, replace

from chatdb.archive import Archive

from ..kv.writer import KVWriter
from ..prompt.path_tokens import PathTokens
from .job import Job
from .scheduler import Scheduler


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
class WarmJob(Job):
    """Read a conversation's path and store its KV; nothing is answered."""
    conv_id: int = 0
    writer: "KVWriter | None" = None
    tally: "Tally | None" = None
    used_at: "str | None" = None   # when the conversation was last used: its KV's recency
    warmed: bool = False

    @classmethod
    def of(cls, conv_id: int, tokens: PathTokens, writer: "KVWriter | None", tally: "Tally",
           used_at: "str | None" = None) -> "WarmJob":
        return cls(prompt=tokens.flat(), sampling=None, path=tokens, on_end=tally.ended,
                   conv_id=conv_id, writer=writer, tally=tally, used_at=used_at)

    def read(self, done: int, total: int) -> None:
        self.tally.read(self, len(self.prompt) - total + done)

    def store(self, cache, drafter_cache=None) -> None:
        if self.writer is not None and self.path.stable and cache.holds(self.path):
            job = cache.store_job(self.path)   # copied out now, written meanwhile
            self.writer.submit(replace(job, used_at=self.used_at))
            self.warmed = True


class Warmer:
    """Warms conversations of `archive` on the slots of one engine (Engine.open with n_seq),
    the most recently used first, as many as the archive's KV budget holds."""

    def __init__(self, engine, archive: Archive):
        self.engine, self.archive = engine, archive

    def warm(self, conv_ids: list[int], progress=None) -> WarmReport:
        """progress(done, total) counts the tokens of the paths to read."""
        report, paths, archive = WarmReport(), [], self.archive
        budget = archive.kv_budget.get().bytes
        room = None if budget is None else budget - archive.kv_keeping.stored_bytes()
        report.budget_bytes = budget
        per_token = self._stored_per_token()
        for conv_id in sorted(conv_ids, key=self._last_used, reverse=True):
            tokens = self.engine.unstored_path(conv_id)
            if tokens is None:
                report.already.append(conv_id)
            elif not tokens.stable or sum(tokens.lengths) > self.engine.model.n_ctx - 1:
                report.too_long.append(conv_id)
            elif report.over_budget or (room is not None
                                        and sum(tokens.lengths) * per_token > room):
                report.over_budget.append(conv_id)   # and every older one: warming stops here
            else:
                paths.append((conv_id, tokens))
                room = None if room is None else room - sum(tokens.lengths) * per_token
        tally = Tally(report, sum(sum(tokens.lengths) for _, tokens in paths), progress)
        waiting = [WarmJob.of(conv_id, tokens, self.engine.writer, tally, self._last_used(conv_id))
                   for conv_id, tokens in reversed(paths)]
        scheduler: Scheduler = self.engine.scheduler
        try:
            tally.show()
            while waiting or scheduler.busy:
                while waiting and scheduler.free:
                    scheduler.assign(waiting.pop())
                scheduler.step()
            report.most_sequences = scheduler.most_sequences
        finally:
            self.engine.flush()   # the KV is in the archive when warm() returns
        return report

    def _last_used(self, conv_id: int) -> str:
        return self.archive.conversation(conv_id).updated_at

    def _stored_per_token(self) -> float:
        """Bytes a token's KV takes stored: as compressed so far under the engine's
        fingerprint, else the raw size (what the budget check must not underestimate)."""
        layout, fingerprint = self.engine.layout, self.engine.fingerprint
        raw = layout.row_bytes_per_token if layout is not None else 0
        usage = self.archive.kv.usage(fingerprint)
        tokens = self.archive.kv.stored_tokens(fingerprint)
        return usage.stored_bytes / tokens if tokens else float(raw)


class Tally:
    """The report's figures as the jobs end, and the progress of the tokens read."""

    def __init__(self, report: WarmReport, total: int, progress):
        self.report, self.total, self.progress = report, total, progress
        self.done: dict[int, int] = {}   # job -> tokens of its path held so far

    def read(self, job: WarmJob, held: int) -> None:
        self.done[id(job)] = held
        self.show()

    def ended(self, job: WarmJob) -> None:
        if job.error is not None:
            raise job.error
        figures = job.figures
        self.report.restored_tokens += figures.restored.restored_tokens
        self.report.computed_tokens += figures.computed_tokens
        if job.warmed:
            self.report.warmed.append(job.conv_id)
        self.read(job, len(job.prompt))

    def show(self) -> None:
        if self.progress:
            self.progress(sum(self.done.values()), self.total)
