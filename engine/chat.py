"""The engine: answer a message of any conversation, resuming its KV from the archive.

    engine = Engine.open(archive, model_path=None)   # default model
    result = engine.reply(conv_id, "Hello!", on_text=print)
    engine.close()                                   # waits for KV to be stored

The user's message is committed before generation starts, so a crash keeps
it; the answer is committed when generation ends, cancelled or not.
"""

import time
from dataclasses import replace

import numpy as np

from chatdb.archive import Archive

from .decode.draft_model import DraftModel
from .decode.draft_policy import DraftPolicy
from .decode.drafting import make_drafter, resolve_mode
from .decode.generate import Generation, generate
from .decode.modes import DraftMode, Finish
from .describe import describe
from .errors import Cancelled, EngineError
from .kv.cache import KVCache, archive_source
from .kv import kv_type as kv_types
from .kv.fingerprint import file_fingerprint, kv_config_fingerprint
from .kv.layout_check import check_layout
from .kv.modes import ROW_MODES, KVMode
from .kv.prefetch import EarlyRead, Prefetch
from .kv.writer import KVWriter, reopening
from .llama.gguf_header import read_facts
from .llama.model import Model
from .llama.model_path import resolve_model_path
from .llama.sampling import Sampler, SamplingSettings
from .llama.sequence import Sequence
from .machine import hardware
from .machine.offload_plan import plan_offload
from .machine.threads import ThreadTuner
from .machine.tuning import Tuning
from .prompt.chat_format import ChatFormat
from .prompt.path_tokens import PathTokens, PromptBuilder, as_chat, tokenizer_id
from .prompt.prepared import Prepared, budget, check_question, fit_prompt
from .turn_result import TurnParts, TurnResult, speculative_figures


class Engine:
    def __init__(self, archive: Archive, model: Model, report: hardware.HardwareReport,
                 offload: str, use_kv: bool = True, sampling: "SamplingSettings | None" = None,
                 warn=None, draft: "str | DraftMode" = DraftMode.AUTO, draft_model=None,
                 kv_mode: "str | KVMode" = KVMode.AUTO, tuning: "Tuning | None" = None, early: "EarlyRead | None" = None):
        self.archive, self.model, self.report, self.offload = archive, model, report, offload
        self.use_kv = use_kv
        self.sampling = sampling or SamplingSettings()   # for turns that pass none; set_sampling
        self.warnings: list[str] = []   # raised during the turn under way (or the last one)
        self._warn_cb = warn
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
        self.tuning = tuning or Tuning(ThreadTuner(), report)
        self.tuning.attach(model, self.cache.decoder, archive, self.fingerprint,
                           measure=self.draft_mode != DraftMode.OFF)
        self.prefetch = Prefetch()

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
        chosen = plan_offload(report, read_facts(path), n_ctx=n_ctx, threads=tuner.choice, n_seq=n_seq,
                              kv_type=cache_type)
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
        prompts, path = PromptBuilder(self.model, self.chat_format.template, archive, self.tokenizer), archive.path(head)
        tokens = prompts.path_tokens(path)
        if sum(tokens.lengths) > budget(self.model.n_ctx, self.sampling, prompts.generation_tokens(path)):
            return  # left to the turn, which windows it
        for cache in [self.cache] + ([self.draft.cache] if self.draft else []):
            cache.warm(tokens, archive, warn)  # warn collects: nothing is printed from this thread

    # -- turns -------------------------------------------------------------------

    def reply(self, conv_id: int, text: str, *, on_text=None, cancelled=None,
              sampling: "SamplingSettings | None" = None, progress=None) -> TurnResult:
        """Add the user's message to the conversation and answer it.

        The message hangs under the path read when it is written
        (Archive.add_question); a message that does not fit is taken back.
        """
        started = self._begin_turn()
        settings = sampling or self.sampling
        question = self.archive.add_question(conv_id, text)
        try:
            path = self.archive.path(question.id)
            check_question(self.prompts, path, settings)
        except BaseException:
            self.archive.retract(question.id)
            raise
        return self._answer(TurnParts(conv_id, question.id, started, head=question.id), path,
                            on_text, cancelled, settings, progress)

    def answer(self, conv_id: int, message_id: int, *, on_text=None, cancelled=None,
               sampling: "SamplingSettings | None" = None, progress=None,
               stop: "list[str] | None" = None) -> TurnResult:
        """Answer an existing message (regenerate, after an edit, or a question
        written before the model loaded) as a new branch; `stop` strings end the
        answer where one appears (not part of it)."""
        settings = sampling or self.sampling
        turn, path = self.start_answer(conv_id, message_id, settings)
        return self._answer(turn, path, on_text, cancelled, settings, progress, stop)

    def start_answer(self, conv_id: int, message_id: int,
                     settings: SamplingSettings) -> "tuple[TurnParts, list]":
        """A turn answering an existing message: its parts, and the path (PromptTooLong
        unless its question fits)."""
        started = self._begin_turn()
        path = self.archive.path(message_id)
        asked = message_id if path[-1].role == "user" else None
        turn = TurnParts(conv_id, asked, started, head=self.archive.conversation(conv_id).head_id)
        if asked is not None:
            check_question(self.prompts, path, settings)
        return turn, path

    def _begin_turn(self) -> float:
        """Start a turn's own warnings (a restore ahead of it reports into them); its start time."""
        self.warnings = []
        self.prefetch.wait(self.warn)
        return time.perf_counter()

    def _answer(self, turn: TurnParts, path, on_text, cancelled, settings, progress,
                stop=None) -> TurnResult:
        self.tuning.before_turn()
        if self.draft is not None:
            self.draft.follow_threads(self.model)
        self.prompts.cancelled = cancelled   # reading a long path stops on Ctrl-C too
        prepared = self.prepare_turn(turn, path, settings)
        prompt, window = prepared.prompt, prepared.window
        acquired = self.cache.acquire(prompt, window.tokens, progress,
                                      capture=prepared.question_end, cancelled=cancelled,
                                      window_key=prepared.key)
        drafter, draft_kv = self._drafter(prompt, None if window.left_out else window.tokens)
        with Sampler(settings, self.model.n_vocab, self.model.vocab) as sampler:
            if settings.penalised:
                sampler.accept(self.cache.live[-settings.repeat_last_n:].tolist())
            # A fresh policy per answer: the same prompt and seed give the same batches.
            policy = DraftPolicy(self.tuning.costs().verify_cost)
            gen = generate(self.model, self.cache, sampler, settings.max_tokens, on_text,
                           cancelled, drafter, policy, self.tuning.clock,
                           list(stop or []) + self.chat_format.markers)
        self.tuning.after_turn(gen.timings)
        return self.finish_turn(turn, prepared, gen, acquired, self.cache,
                                speculative_figures(self.draft_mode, gen, policy, draft_kv))

    def prepare_turn(self, turn: TurnParts, path, settings: SamplingSettings) -> Prepared:
        """The prompt answering the last message of `path`, fitted to the context."""
        fitted = fit_prompt(self.prompts, path, settings, self.fingerprint)
        if fitted.window.left_out:
            self.warn(f"the conversation is longer than the context: the oldest "
                      f"{fitted.window.left_out} messages after the system prompt are left out")
        turn.prompt_tokens, turn.left_out_messages = len(fitted.prompt), fitted.window.left_out
        return fitted

    def finish_turn(self, turn: TurnParts, prepared: Prepared, gen: Generation, acquired,
                    cache: KVCache, speculative: dict) -> TurnResult:
        """Commit the answer `cache`'s sequence generated, and store that sequence's KV."""
        if gen.finish == Finish.CANCELLED and not gen.tokens:
            raise Cancelled()  # nothing was said: no empty answer joins later prompts
        message_id, answer = self._save_answer(turn, prepared.path, prepared.opening, gen,
                                               len(prepared.window.tokens.flat()), cache)
        self._store_kv(prepared.window, message_id, answer, prepared.key, cache,
                       reopening(acquired.source, acquired.restored_tokens, prepared))
        return turn.result(message_id, gen, acquired, self.warnings, speculative)

    def store_path_kv(self, tokens: PathTokens, cache: KVCache, key: "str | None" = None, *,
                      used_at: "str | None" = None, reopened=None) -> bool:
        """Store the KV of a path that `cache`'s sequence holds (under `key` for a window);
        False where it does not hold exactly that path. `used_at`, `reopened`: as StoreJob's."""
        if self.writer is None or not tokens.stable or not np.array_equal(cache.live, tokens.flat()):
            return False
        job = cache.store_job(tokens, key)   # copied out now, written meanwhile
        self.writer.submit(replace(job, used_at=used_at, reopened=reopened))
        return True

    def _drafter(self, prompt: np.ndarray, path: "PathTokens | None"):
        """(the drafter for this answer, how the draft model's KV was obtained or None)."""
        # The draft model's KV is restored too, like the target's.
        draft_kv = self.draft.cache.acquire(prompt, path) if self.draft is not None else None
        return make_drafter(self.draft_mode, prompt.tolist(), self.draft), draft_kv

    def _save_answer(self, turn: TurnParts, path, opening, gen: Generation, start: int,
                     cache: KVCache) -> "tuple[int, list[int] | None]":
        """Commit the answer with its exact tokens, and feed its tail to the model;
        (its message id, those tokens or None).

        The head moves to it only if it is still at `turn.head`, where this turn
        found or left it: another turn that moved it meanwhile keeps its branch.
        """
        answer = self._exact_answer(path, opening, gen)
        with self.archive.transaction():
            message = self.archive.add_message(
                turn.conversation_id, "assistant", gen.text, parent_id=path[-1].id,
                status=gen.status, meta={"finish": gen.finish, "model": self.model.description()},
                move_head=False)
            self.archive.advance_head(turn.conversation_id, turn.head, message.id)
            if answer is not None:
                self.archive.tokens.put(message.id, self.tokenizer, answer)
        tail = answer[len(cache.live) - start:] if answer is not None else []
        if answer is not None and len(cache.live) + len(tail) <= self.model.n_ctx:
            cache.extend(tail)   # the model has seen the answer up to the live end
        # An answer that ran into the context's end is kept; its KV, which the
        # context cannot hold with the answer's closing tokens, is not stored.
        return message.id, answer

    def _exact_answer(self, path, opening, gen: Generation) -> "list[int] | None":
        """The answer's exact tokens; None (the answer is kept all the same) when the
        template renders it other than as it was generated."""
        try:
            return self.prompts.answer_tokens(as_chat(path), opening, gen.text, gen.tokens,
                                              gen.covered)
        except EngineError as exc:  # not prefix-stable, or failing on this answer
            self.warn(f"the answer's tokens are not stored: {exc}")
            return None

    def _store_kv(self, window, message_id: int, answer: "list[int] | None", key: "str | None",
                  cache: KVCache, reopened=None) -> None:
        """Store the KV of the window (the path, or its windowed part) and the answer."""
        if answer is None or not window.tokens.stable:
            return  # the template is not prefix-stable: no exact tokens to key KV by
        full = PathTokens(window.tokens.message_ids + [message_id],
                          window.tokens.arrays + [np.asarray(answer, np.int32)])
        if self.store_path_kv(full, cache, key, reopened=reopened) and self.draft is not None and key is None \
                and cache is self.cache:
            self.draft.cache.follow(full.flat())
            self.writer.submit(self.draft.cache.store_job(full))

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
        if self.draft is not None:
            self.draft.close()
        self.cache.close()
        self.model.close()

    def flush(self) -> None:
        self.prefetch.wait(self.warn)
        if self.writer is not None:
            self.writer.flush()


__all__ = ["Engine", "TurnResult", "EngineError"]
