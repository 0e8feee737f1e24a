"""Answering a message of the archive: the answer committed with its exact tokens, its KV stored.

The user's message is in the archive before the job is built; the answer is
committed when generation ends, cancelled or not (an answer cancelled
before its first token is not: nothing was said). Its KV is stored once the
model has seen the whole answer (its tail: the last token sampled, the
template's closing), under the path's fingerprint, or a window's key.
"""

from dataclasses import dataclass, field, replace

import numpy as np

from chatdb.archive import Archive

from ..decode.modes import Finish
from ..decode.stream import Generation
from ..errors import Cancelled, EngineError
from ..kv.writer import KVWriter, reopening
from ..prompt.path_tokens import PathTokens, PromptBuilder
from ..prompt.prepared import Prepared
from .job import Job, SlotFigures, TurnResult


@dataclass(frozen=True)
class AnswerArchive:
    """What answer jobs need of the engine: the archive, the prompts' tokenizer, the writer."""
    archive: Archive
    prompts: PromptBuilder
    tokenizer: str
    writer: "KVWriter | None"
    model_name: str               # in each answer's meta
    n_ctx: int
    warn: "object"                # (message) -> None


@dataclass
class AnswerJob(Job):
    keeper: "AnswerArchive | None" = None
    conversation_id: int = 0
    user_message_id: "int | None" = None   # the question answered, where it is a user message
    head: "int | None" = None     # where the turn found or left the head (the answer moves it)
    prepared: "Prepared | None" = None
    warnings: list = field(default_factory=list)   # the engine's, for the turn under way
    # the path with the answer, to store once the model has seen all of it
    stored_path: "PathTokens | None" = field(default=None, init=False, repr=False)
    # (tokens restored from the archive, tokens before the turn), where it reopened a chat
    reopened: "tuple[int, int] | None" = field(default=None, init=False, repr=False)

    @classmethod
    def of(cls, keeper: AnswerArchive, conversation_id: int, prepared: Prepared, sampling,
           head, user_message_id=None, **callbacks) -> "AnswerJob":
        """The job answering the last message of `prepared.path`; `callbacks`: Job's
        on_text, on_logprob, cancelled, progress, stop, follows, draft."""
        window = prepared.window
        return cls(prompt=prepared.prompt, sampling=sampling, path=window.tokens,
                   window_key=prepared.key, question_end=prepared.question_end, keeper=keeper,
                   conversation_id=conversation_id, user_message_id=user_message_id, head=head,
                   prepared=prepared, **callbacks)

    @property
    def answering(self) -> "tuple[int, int]":
        return self.conversation_id, self.prepared.path[-1].id

    def answered(self, gen: Generation, figures: SlotFigures, held: int) -> "list[int] | None":
        """Commit the answer, build the result; the answer's tail, which the model has not
        seen, to feed before storing (None: nothing to store)."""
        self.generation = gen
        if gen.finish == Finish.CANCELLED and not gen.tokens:
            raise Cancelled()  # nothing was said: no empty answer joins later prompts
        message_id, answer = self._commit(gen)
        window, restored = self.prepared.window, figures.restored
        self.reopened = reopening(restored.source, restored.restored_tokens, self.prepared)
        path = self.prepared.path
        after_system = len(path) - (1 if path and path[0].role == "system" else 0)
        # window.first_kept is None when the answer follows the system prompt alone, as
        # when a request sends nothing else.
        self.result = TurnResult.of(self.conversation_id, self.user_message_id, message_id, gen,
                                    figures, len(self.prompt), self.started, self.warnings,
                                    window.left_out, window.first_kept(path), after_system + 1)
        if answer is None:
            return None
        tail = answer[held - len(window.tokens.flat()):]
        if held + len(tail) > self.keeper.n_ctx:
            # An answer that ran into the context's end is kept; its KV, which the
            # context cannot hold with the answer's closing tokens, is not stored.
            return None
        if window.tokens.stable:
            self.stored_path = PathTokens(window.tokens.message_ids + [message_id],
                                      window.tokens.arrays + [np.asarray(answer, np.int32)])
        return tail

    def _commit(self, gen: Generation) -> "tuple[int, list[int] | None]":
        """Add the answer with its exact tokens; (its message id, those tokens or None).

        The head moves to it only if it is still at `head`, where this turn found or
        left it: another turn that moved it meanwhile keeps its branch.
        """
        keeper, path = self.keeper, self.prepared.path
        answer = self._exact_tokens(gen)
        archive = keeper.archive
        with archive.transaction():
            message = archive.add_message(
                self.conversation_id, "assistant", gen.text, parent_id=path[-1].id,
                status=gen.status, meta={"finish": gen.finish, "model": keeper.model_name},
                move_head=False)
            archive.advance_head(self.conversation_id, self.head, message.id)
            if answer is not None:
                archive.tokens.put(message.id, keeper.tokenizer, answer)
        return message.id, answer

    def _exact_tokens(self, gen: Generation) -> "list[int] | None":
        """The answer's exact tokens; None (the answer is kept all the same) when the
        template renders it other than as it was generated."""
        prompts, prepared = self.keeper.prompts, self.prepared
        try:
            return prompts.answer_tokens(prompts.chat(prepared.path), prepared.opening, gen.text,
                                         gen.tokens, gen.covered)
        except EngineError as exc:  # not prefix-stable, or failing on this answer
            self.keeper.warn(f"the answer's tokens are not stored: {exc}")
            return None

    def store(self, cache, drafter_cache=None) -> None:
        """Store the KV of the window (the path, or its windowed part) and the answer, and
        the draft model's where it follows this sequence (not under a window's key)."""
        full, writer = self.stored_path, self.keeper.writer
        if full is None or writer is None or not cache.holds(full):
            return
        job = cache.store_job(full, self.window_key)   # copied out now, written meanwhile
        writer.submit(replace(job, reopened=self.reopened))
        if drafter_cache is not None and self.window_key is None:
            drafter_cache.follow(full.flat())
            writer.submit(drafter_cache.store_job(full))
