"""The engine: answer a message of any conversation, resuming its KV from the archive.

    engine = Engine.open(archive, model_path=None)   # default model
    result = engine.reply(conv_id, "Hello!", on_text=print)
    engine.close()                                   # waits for KV to be stored

The user's message is committed before generation starts, so a crash keeps
it; the answer is committed when generation ends, cancelled or not.

A turn is a job (batching/answer_job.py) run by the engine's slots
(batching/scheduler.py): one slot for the console and `ask`, run on the
caller's thread; n_seq slots for a server (batching/request_loop.py) or for
warming (batching/warming.py), the same pipeline.
"""

import time

from chatdb.archive import Archive
from chatdb.message_match import Placement, place, unplace

from .batching.answer_job import AnswerArchive, AnswerJob
from .batching.job import Job, TurnResult
from .batching.scheduler import Scheduler
from .batching.slot import Slot
from .decode.archive_drafts import ArchiveDrafts
from .decode.draft_model import DraftModel
from .decode.drafting import Drafting, resolve_mode
from .decode.modes import DraftMode
from .describe import describe
from .errors import EngineError
from .kv.cache import KVCache, archive_source
from .kv import kv_type as kv_types
from .kv.fingerprint import file_fingerprint, kv_config_fingerprint
from .kv.layout_check import check_layout
from .kv.modes import ROW_MODES, KVMode
from .kv.prefetch import EarlyRead, Prefetch
from .kv.writer import KVWriter
from .llama.gguf_header import read_facts
from .llama.model import Model
from .llama.model_path import resolve_model_path
from .llama.sampling import SamplingSettings
from .llama.sequence import Sequence
from .machine import hardware
from .machine.offload_plan import plan_offload
from .machine.threads import ThreadTuner
from .machine.tuning import Tuning
from .prompt.chat_format import ChatFormat
from .prompt.path_tokens import PathTokens, PromptBuilder, tokenizer_id
from .prompt.prepared import Prepared, budget, check_question, check_window, fit_prompt
from .prompt.tool_format import CallSyntax


class Engine:
    def __init__(self, archive: Archive, model: Model, hardware_report: hardware.HardwareReport,
                 offload: str, use_kv: bool = True, sampling: "SamplingSettings | None" = None,
                 warn=None, draft: "str | DraftMode" = DraftMode.AUTO, draft_model=None,
                 kv_mode: "str | KVMode" = KVMode.AUTO, tuning: "Tuning | None" = None,
                 early: "EarlyRead | None" = None):
        self.archive, self.model, self.offload = archive, model, offload
        self.hardware = hardware_report   # the devices and cores found, as doctor reports them
        self.use_kv = use_kv
        self.sampling = sampling or SamplingSettings()   # for turns that pass none; set_sampling
        self.warnings: list[str] = []   # raised during the turn under way (or the last one)
        self._warn_cb = warn
        if hardware_report.without_gpu():   # a GPU build running on the CPU: said once, at the start
            self.warn(hardware_report.without_gpu())
        model_fp = file_fingerprint(model.path, archive.fingerprints)
        self.chat_format = ChatFormat.of(model)
        self.tokenizer = tokenizer_id(self.chat_format.template, model_fp)
        # SNAPSHOT stores whole states even where rows could be cut (the
        # fallback for sliding-window, recurrent and hybrid models).
        self.layout, self.kv_mode = ((None, KVMode.SNAPSHOT) if KVMode(kv_mode) == KVMode.SNAPSHOT
                                     else check_layout(model, self.warn))
        self.fingerprint = kv_config_fingerprint(model_fp, model.config, self.kv_mode)
        if self.chat_format.warning:
            self.warn(self.chat_format.warning)
        self.prompts = PromptBuilder(model, self.chat_format.template, archive, self.tokenizer)
        self.cache = KVCache(Sequence(model), archive,
                             archive_source(self.kv_mode, self.fingerprint, self.layout),
                             use_archive=use_kv, warn=self.warn,
                             early=early.take(self.fingerprint) if early is not None else None)
        self.writer = KVWriter(archive.db_path, on_error=lambda e: self.warn(f"KV not stored: {e}"),
                               on_note=self.warn, span=model.attention_span) \
            if use_kv and archive.db_path else None
        self.draft_mode = resolve_mode(draft, draft_model is not None, model.cuts_back)
        self.draft = (DraftModel(draft_model, model, archive, use_kv, self.warn)
                      if self.draft_mode.uses_model else None)
        self.tuning = tuning or Tuning(ThreadTuner(), hardware_report)
        self.tuning.attach(model, self.cache.seq, archive, self.fingerprint,
                           measure=self.draft_mode != DraftMode.OFF)
        self.prefetch = Prefetch()
        self.archive_drafts = ArchiveDrafts(archive, self.tokenizer, warn=self.warn)
        self.keeper = AnswerArchive(archive, self.prompts, self.tokenizer, self.writer,
                                    model.description(), model.n_ctx, self.warn)
        self.scheduler = self._slots()

    def _slots(self) -> Scheduler:
        """A slot per sequence of the context (the model may hold fewer than asked), each
        with its own sequence of the draft model; paced where there are several."""
        model, n = self.model, self.model.config.n_seq_max
        caches = [self.cache] + [self.cache.sibling(i) for i in range(1, n)]
        costs = lambda: self.tuning.costs().verify_cost  # noqa: E731 (read as each answer starts)
        shared_row = self.tuning.shared.row_cost
        slots = [Slot(cache, model, Drafting(self.draft_mode, self._drafter(i), costs,
                                             self.archive_drafts, shared_row),
                      self.chat_format.markers)
                 for i, cache in enumerate(caches)]
        return Scheduler(model, slots, paced=n > 1, clock=self.tuning.clock,
                         on_resume=self._resume, on_pause=self.tuning.after_turn,
                         on_shared=self.tuning.shared.add)

    def _drafter(self, index: int):
        """Slot `index`'s sequence of the draft model (None: no draft model, or fewer
        sequences there)."""
        if self.draft is None or index >= len(self.draft.caches):
            return None
        return self.draft.drafter(index)

    def _resume(self) -> None:
        """Before a step after a pause: threads for the free cores now, the draft model's too."""
        self.tuning.before_turn()
        if self.draft is not None:
            self.draft.follow_threads(self.model)

    @classmethod
    def open(cls, archive: Archive, model_path=None, *, n_ctx: "int | None" = None,
             use_kv: bool = True, sampling: "SamplingSettings | None" = None, warn=None,
             draft: "str | DraftMode" = DraftMode.AUTO, draft_model=None,
             kv_mode: "str | KVMode" = KVMode.AUTO,
             resume: "int | None" = None, threads: "int | None" = None,
             n_seq: int = 1, kv_type: "str | None" = None) -> "Engine":
        """Load a model for the archive; `resume`, a message the first turn continues,
        has its stored KV read and decompressed while the model loads; `threads`
        fixes the thread count (else chosen from the free cores, turn by turn);
        `n_seq` sequences share the context, n_ctx tokens each (KVCache.sibling);
        `kv_type` (f16, q8_0; kv/kv_type.py) else the archive's."""
        path = resolve_model_path(model_path)
        resolve_mode(draft, draft_model is not None)  # a bad option fails before loading
        cache_type = kv_types.chosen(kv_type, archive)
        tuner = ThreadTuner(threads)  # measures the others while the model loads
        report = hardware.detect()
        chosen = plan_offload(report, read_facts(path), n_ctx=n_ctx, threads=tuner.choice,
                              n_seq=n_seq, kv_type=cache_type)
        early = None
        if resume is not None and use_kv and archive.db_path and kv_mode != KVMode.SNAPSHOT:
            # The fingerprints the engine may have, by the mode its layout check picks.
            model_fp = file_fingerprint(path, archive.fingerprints)
            early = EarlyRead(archive.db_path, resume, [
                kv_config_fingerprint(model_fp, chosen.config, mode) for mode in ROW_MODES])
        model = Model(str(path), chosen.config)
        try:
            return cls(archive, model, report, chosen.offload, use_kv, sampling, warn,
                       draft, draft_model, kv_mode, Tuning(tuner, report), early)
        except Exception:
            model.close()
            raise

    def set_sampling(self, settings: SamplingSettings) -> None:
        """The settings of later turns (and of what `prepare` restores for them)."""
        self.sampling = settings

    def warn(self, message: str) -> None:
        self.warnings.append(message)
        if self._warn_cb:
            self._warn_cb(message)

    # -- ahead of a turn ------------------------------------------------------------

    def prepare(self, conv_id: int) -> None:
        """Restore the conversation's KV in the background, ahead of its next turn.

        Every other call waits for it first. Paths too long for the context
        are left to the turn (it leaves old messages out).
        """
        self.prefetch.wait(self.warn)
        head = self.archive.conversation(conv_id).head_id
        if self.use_kv and self.archive.db_path and head is not None:
            self.prefetch.start(self.archive.db_path, lambda archive, warn: self._warm(archive, head, warn))

    def _warm(self, archive: Archive, head: int, warn) -> None:
        prompts = PromptBuilder(self.model, self.chat_format.template, archive, self.tokenizer)
        path = archive.path(head)
        tokens = prompts.path_tokens(path)
        if sum(tokens.lengths) > budget(self.model.n_ctx, self.sampling, prompts.generation_tokens(path)):
            return  # left to the turn, which windows it
        for cache in [self.cache] + ([self.draft.cache] if self.draft else []):
            cache.warm(tokens, archive, warn)  # warn collects: nothing is printed from this thread

    # -- turns -------------------------------------------------------------------

    def reply(self, conv_id: int, text: str, *, on_text=None, cancelled=None,
              sampling: "SamplingSettings | None" = None, progress=None,
              draft: "str | DraftMode | None" = None) -> TurnResult:
        """Add the user's message to the conversation and answer it; `draft`: this turn's
        speculative decoding (default: the engine's).

        The message hangs under the path read when it is written
        (Archive.add_question); a message that does not fit is taken back.
        """
        self._begin_turn()
        settings, draft = sampling or self.sampling, self._draft(draft)
        question = self.archive.add_question(conv_id, text)
        try:
            path = self.archive.path(question.id)
            check_question(self.prompts, path, settings)
        except BaseException:
            self.archive.retract(question.id)
            raise
        # Reading a long path may be stopped (Cancelled): the question stays, unanswered.
        job = self._job(conv_id, path, settings, head=question.id, on_text=on_text,
                        cancelled=cancelled, progress=progress, draft=draft)
        return self.scheduler.run(job)

    def answer(self, conv_id: int, message_id: int, *, on_text=None, cancelled=None,
               sampling: "SamplingSettings | None" = None, progress=None,
               stop: "list[str] | None" = None, draft: "str | DraftMode | None" = None
               ) -> TurnResult:
        """Answer an existing message (regenerate, after an edit, or a question
        written before the model loaded) as a new branch; `stop` strings end the
        answer where one appears (not part of it)."""
        self._begin_turn()
        job = self.answer_job(conv_id, message_id, sampling or self.sampling, on_text=on_text,
                              cancelled=cancelled, progress=progress, stop=list(stop or []),
                              draft=self._draft(draft))
        return self.scheduler.run(job)

    def _begin_turn(self) -> None:
        """Start a console turn's own warnings (a restore ahead of it reports into them)."""
        self.warnings = []
        self.prefetch.wait(self.warn)

    def _draft(self, mode: "str | DraftMode | None") -> "DraftMode | None":
        """A turn's own drafting, checked as --draft is (None: the engine's)."""
        if mode is None:
            return None
        return resolve_mode(mode, self.draft is not None, self.model.cuts_back)

    # -- jobs, for any scheduler of this engine's slots -------------------------------------

    def answer_job(self, conv_id: int, message_id: int, sampling: SamplingSettings,
                   **callbacks) -> AnswerJob:
        """The job answering message `message_id` (PromptTooLong unless its question fits);
        `callbacks`: Job's on_text, on_logprob, cancelled, progress, stop, follows, draft,
        on_end. A job following another answers the same prompt."""
        started = time.perf_counter()
        head = self.archive.conversation(conv_id).head_id
        leader = callbacks.get("follows")
        if isinstance(leader, AnswerJob):
            return AnswerJob.of(self.keeper, conv_id, leader.prepared, sampling, head,
                                leader.user_message_id, started=started,
                                warnings=self.warnings, **callbacks)
        path = self.archive.path(message_id)
        if path[-1].role == "user":
            check_question(self.prompts, path, sampling)
        return self._job(conv_id, path, sampling, head, started=started, **callbacks)

    def _job(self, conv_id: int, path, sampling: SamplingSettings, head,
             **callbacks) -> AnswerJob:
        asked = path[-1].id if path[-1].role == "user" else None
        prepared = self._fitted(path, sampling, callbacks.get("cancelled"))
        return AnswerJob.of(self.keeper, conv_id, prepared, sampling, head, asked,
                            warnings=self.warnings, **callbacks)

    def _fitted(self, path, settings: SamplingSettings, cancelled=None) -> Prepared:
        """The prompt answering the last message of `path`, fitted to the context; reading
        a long path stops (Cancelled) when `cancelled()` turns true."""
        self.prompts.stop_when(cancelled)
        fitted = fit_prompt(self.prompts, path, settings, self.fingerprint)
        check_window(fitted, self.prompts.model.n_ctx, settings)
        if fitted.window.left_out:
            self.warn(f"the conversation is longer than the context: the oldest "
                      f"{fitted.window.left_out} messages after the system prompt are left out")
        return fitted

    def window_of(self, message_id: int) -> "tuple[int, int | None]":
        """(messages after the system prompt left out, the first one kept) of the window
        that answered `message_id`, an answer (its question's window), or that will answer
        it, a question: fitted as a turn fits it, with the engine's sampling (its max_tokens
        sets the room), so a chat opened again shows what the model no longer sees."""
        path = self.archive.path(message_id)
        if path[-1].role == "assistant" and len(path) > 1:
            path = path[:-1]
        if path[-1].role == "system":
            return 0, None
        window = fit_prompt(self.prompts, path, self.sampling, self.fingerprint).window
        return window.left_out, window.first_kept(path)

    def completion_job(self, prompt: "list[int]", sampling: SamplingSettings, **callbacks) -> Job:
        """A job answering raw prompt tokens (a completion): nothing placed or stored."""
        if not len(prompt):   # a slot would wait for a first token that never comes
            raise EngineError("a completion needs at least one prompt token")
        return Job(prompt=prompt, sampling=sampling, **callbacks)

    def place(self, messages, title: str = "", meta: "dict | None" = None,
              tags=(), owner: "str | None" = None, share_prefix: bool = False) -> Placement:
        """A client's whole message list in the tree: the longest stored path of `owner`'s
        with the same messages is reused, only what follows is added (chatdb.message_match);
        the conversation it lands in is given `tags`."""
        return place(self.archive, messages, title, meta or {}, tags, owner, share_prefix)

    def unplace(self, placement: Placement) -> None:
        """Take back the messages `placement` added (a request refused before any answer)."""
        unplace(self.archive, placement)

    def unstored_path(self, conv_id: int) -> "PathTokens | None":
        """The path tokens of a conversation whose head has no stored KV, else None."""
        head = self.archive.conversation(conv_id).head_id
        if head is None:
            return None
        stored = self.archive.kv.deepest_restorable(head, self.fingerprint)
        if stored is not None and stored.message_id == head:
            return None
        return self.prompts.path_tokens(self.archive.path(head))

    @property
    def tool_syntax(self) -> CallSyntax:
        """How the model's chat template takes tools: natively, or in chatdb's own format
        (engine/prompt/tool_support.py)."""
        return self.chat_format.template.tool_syntax

    @property
    def threads(self) -> dict:
        """The decode and batch threads in use."""
        return {"decode": self.model.threads_decode, "batch": self.model.threads_batch}

    # -- reporting and shutdown ------------------------------------------------

    def describe(self) -> dict:
        """What `chatdb doctor` reports (describe.py)."""
        return describe(self)

    def close(self) -> None:
        """Wait for KV to be stored, then free the model."""
        self.prefetch.wait(self.warn)
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        self.scheduler.close()
        if self.draft is not None:
            self.draft.close()
        for slot in self.scheduler.slots:
            slot.cache.close()
        self.model.close()

    def flush(self) -> None:
        self.prefetch.wait(self.warn)
        if self.writer is not None:
            self.writer.flush()


__all__ = ["Engine", "TurnResult", "EngineError"]
