"""One sequence of the shared context, and the job it runs through explicit states.

    IDLE -start-> RESTORING -> READING -(prompt read)-> GENERATING -(answer ends)-> STORING -> IDLE
        └-(follows another job)-> WAITING -(that one's prompt read: KV copied)-┘
    A job that only reads (warm) goes from READING to STORING.

RESTORING: the prompt's KV from the best source (KVCache.restore: the live
prefix, memory, the archive), computing nothing. READING: the rest of the
prompt, in chunks the scheduler gives it, into the shared batch, stopping at
the capture point (the question's end) where a sliding-window or hybrid
model's state must be kept for storing. GENERATING: each step the slot adds
its next token and its own drafted guesses to the batch, then reads its own
logits rows back: the job's sampler samples at each, guesses are kept while
they match (decode/drafting.accept_guesses), the rejected ones' cells dropped again.
STORING: the job commits the answer; the tokens the model has not seen yet
(the answer's last, the template's closing) go into one more pass, then the
KV is handed to the writer.

The scheduler (scheduler.py) only calls start, wants, plan, queue, decoded,
failed and cancel_check; everything else is the slot's own.
"""

import time
from enum import StrEnum

import numpy as np

from ..decode.drafting import Drafting, accept_guesses, from_each_other
from ..decode.modes import Finish
from ..decode.stream import Stream
from ..errors import Cancelled
from ..kv.cache import KVCache
from ..llama.batch import MultiBatch
from ..llama.model import Model
from .job import Job, SlotFigures


class SlotState(StrEnum):
    IDLE = "idle"
    RESTORING = "restoring"     # the prompt's KV from a source
    WAITING = "waiting"         # for the job it follows to read their prompt
    READING = "reading"         # the rest of the prompt, into the shared batch
    GENERATING = "generating"   # a token (and guesses) per step
    STORING = "storing"         # the answer's tail into one more pass, then the KV stored


class Slot:
    def __init__(self, cache: KVCache, model: Model, drafting: "Drafting | None" = None,
                 markers: "list[str] | None" = None):
        """`markers`: the model's turn markers, which end an answer written as text."""
        self.cache, self.model = cache, model
        self.drafting = drafting or Drafting()
        self.markers = list(markers or [])
        self.state = SlotState.IDLE
        self.job: "Job | None" = None
        self._clear()

    def _clear(self) -> None:
        self.job = self.sampler = self.stream = self.draft = self.draft_restored = None
        self.leader: "Slot | None" = None      # WAITING: the slot reading its prompt
        self.followers: "list[Slot]" = []      # slots answering the same prompt, waiting for it
        self.figures: "SlotFigures | None" = None
        self.pending = np.zeros(0, np.int32)   # prompt tokens still to read
        self.capture_at: "int | None" = None
        self.context: list[int] = []           # prompt and answer so far (the drafters read it)
        self.next_token = -1                   # sampled, to be decoded at the next step
        self.planned: list[int] = []           # this step's tokens
        self.logits = "none"                   # where this step's tokens want logits
        self.row = -1                          # batch row of this step's first logits
        self.tail: list[int] = []              # tokens to feed before storing
        self.arrived = 0.0

    # -- what the scheduler sees ---------------------------------------------------

    @property
    def busy(self) -> bool:
        return self.state != SlotState.IDLE

    @property
    def seq_id(self) -> int:
        return self.cache.seq.seq_id

    @property
    def cells(self) -> int:
        """Tokens its sequence holds."""
        return len(self.cache.seq)

    def holds(self, prompt: np.ndarray, owner: "str | None" = None) -> int:
        """How many leading tokens of `prompt` the sequence holds already for `owner`."""
        return self.cache.prefix_of(prompt, owner)

    # -- starting ---------------------------------------------------------------------

    def start(self, job: Job, leader: "Slot | None" = None) -> None:
        """Take `job`: restore its prompt's KV (or wait for `leader`, the slot reading the
        prompt of the job it follows). An exception leaves the slot idle."""
        self.job, self.arrived = job, time.perf_counter()
        self.figures = SlotFigures(self.seq_id)
        try:
            if job.answers:
                self.sampler = job.sampler(self.model)
            if leader is not None:
                leader.lead(self)
                self.leader, self.state = leader, SlotState.WAITING
                return
            self.state = SlotState.RESTORING
            restored = self.cache.restore(job.prompt, job.path, limit=job.restore_limit,
                                          window_key=job.window_key, owner=job.owner)
        except BaseException:
            self._release()
            raise
        self.figures.restored_by(restored, len(job.prompt))
        n, boundary = restored.restored_tokens, job.question_end
        self.pending = job.prompt[n:]
        self.capture_at = (boundary if self.cache.captures and boundary is not None
                           and n < boundary < len(job.prompt) else None)
        self.state = SlotState.READING
        if not len(self.pending):   # all of it restored (a job that only reads)
            self._prompt_read()

    # -- a step: what it adds to the batch ----------------------------------------------

    def wants(self, most: int) -> int:
        """Prompt tokens it would read this step, at most `most` (READING only)."""
        if self.capture_at is not None:
            most = min(most, self.capture_at - len(self.cache.seq))
        return min(most, len(self.pending))

    def plan(self, room: int, prompt_share: int = 0, shared: int = 0) -> int:
        """Choose this step's tokens, at most `room` (a reading slot: `prompt_share` of its
        prompt; `shared`: other sequences computing in the same pass); how many."""
        if self.state == SlotState.READING:
            part = self.pending[:min(prompt_share, room)]
            self.planned = part.tolist()
            self.logits = "last" if self.job.answers and len(part) == len(self.pending) else "none"
        elif self.state == SlotState.GENERATING:
            position = len(self.cache.seq)
            left = min(self.stream.left - 1, self.model.n_ctx - position - 2, room - 1)
            drafts = self.draft.guesses(self.context, position, max(0, left), shared)
            self.planned = [self.next_token] + drafts
            self.logits = "all" if drafts else "last"
        elif self.state == SlotState.STORING:
            self.planned, self.logits = self.tail, "none"
        else:
            self.planned = []
        return len(self.planned)

    def queue(self, batch: MultiBatch) -> None:
        """Add this step's tokens to the batch."""
        if self.planned:
            self.row = self.cache.seq.queue(batch, self.planned, self.logits)

    @property
    def abort(self):
        """The callable a pass of this slot's alone may be stopped by (a prompt's only)."""
        return self.job.cancelled if self.state == SlotState.READING else None

    # -- a step: what came back ---------------------------------------------------------

    def decoded(self, held: int) -> None:
        """The pass holding this step's tokens is done; it held `held` sequences."""
        if not self.planned:
            return
        if self.state == SlotState.READING:
            self._read(held)
        elif self.state == SlotState.GENERATING:
            self._generated(held)
        elif self.state == SlotState.STORING:
            self.cache.seq.settle()
            self._store()

    def _read(self, held: int) -> None:
        part = self.planned
        self.cache.seq.settle()
        self.figures.passed(held, reading=True)
        self.pending = self.pending[len(part):]
        if self.capture_at is not None and len(self.cache.seq) == self.capture_at:
            self.cache.capture(self.capture_at)
            self.capture_at = None
        total = self.figures.computed_tokens
        self.job.read(total - len(self.pending), total)
        if not len(self.pending):
            self._prompt_read()

    def _prompt_read(self) -> None:
        """The sequence holds the prompt (its last token's logits at `row`, for an answer)."""
        job = self.job
        if not job.answers:
            self.tail = []
            return self._store()
        if job.is_cancelled():
            return self._end(Cancelled(self._computed()))
        followers, self.followers = self.followers, []
        for follower in followers:   # from the same KV and the same logits row
            follower.take_prompt(self, self.row)
        self._generate(self.row)
        from_each_other([(s.draft, s.context, len(s.job.prompt)) for s in [self] + followers
                         if s.state == SlotState.GENERATING])

    def _generate(self, row: int) -> None:
        job = self.job
        self.context = job.prompt.tolist()
        self.stream = Stream(self.model, job.sampling.max_tokens, job.on_text, job.cancelled,
                             list(job.stop) + self.markers, job.on_logprob)
        self.draft = self.drafting.run(self.context, job.draft, job.draft_cost, job.answering)
        if self.draft.uses_model:   # the draft model's KV is restored too, like the target's
            self.draft_restored = self.drafting.draft_model.restore(
                job.prompt, job.path if job.window_key is None else None, owner=job.owner)
        self.state = SlotState.GENERATING
        if job.sampling.max_tokens <= 0:
            self.stream.end(Finish.LENGTH)
            return self._answered()
        self._take(self.sampler.sample(self.model.ctx, row))

    def _generated(self, held: int) -> None:
        drafts = self.planned[1:]
        seq = self.cache.seq
        self.figures.passed(held, reading=False)
        if not drafts:
            seq.settle()
            return self._take(self.sampler.sample(self.model.ctx, self.row))
        accepted, following = accept_guesses(self.sampler, self.model.ctx, self.row, drafts,
                                             self._keep)
        seq.settle(1 + accepted)
        self.draft.verified(len(drafts), accepted)
        if following is None:
            return self._answered()
        self._take(following)

    def _keep(self, guess: int) -> bool:
        """An accepted guess: True where the answer ends at it."""
        if self.stream.emit(guess, self.sampler.last):
            return True
        self.context.append(guess)
        return False

    def _take(self, token: int) -> None:
        """A sampled token: the answer ends at it, or it is decoded at the next step."""
        if self.stream.emit(token, self.sampler.last):
            return self._answered()
        if len(self.cache.seq) + 1 >= self.model.n_ctx:
            self.stream.end(Finish.CONTEXT)
            return self._answered()
        self.context.append(token)
        self.next_token = token

    # -- the end ----------------------------------------------------------------------

    def _answered(self) -> None:
        gen = self.stream.close()
        job, seq = self.job, self.cache.seq
        # A stop string's tokens are not the answer's; the sequence holds the others but
        # the last one sampled.
        self.cache.truncate(len(job.prompt) + len(gen.tokens))
        self.figures.drafted(self.draft.figures(self.draft_restored))
        try:
            tail = job.answered(gen, self.figures, len(seq))
        except Exception as exc:
            return self._end(exc)
        if tail is None:
            return self._end()
        self.tail, self.state = list(tail), SlotState.STORING
        if not self.tail:
            self._store()

    def _store(self) -> None:
        drafter = self.drafting.draft_model
        try:
            self.job.store(self.cache, drafter.cache if drafter is not None else None)
        except Exception as exc:
            return self._end(exc)
        self._end()

    # -- answers sharing a prompt (n > 1) ------------------------------------------------

    def lead(self, follower: "Slot") -> None:
        """`follower` waits for this slot to read the prompt its job answers too."""
        self.followers.append(follower)

    def unlead(self, follower: "Slot") -> None:
        """`follower` no longer waits (its job was cancelled)."""
        self.followers.remove(follower)

    def take_prompt(self, leader: "Slot", row: int) -> None:
        """WAITING: the leader has read the prompt: hold its KV and sample from its logits
        (batch `row`)."""
        self.leader = None
        self.cache.seq.copy_from(leader.cache.seq)
        self.figures.read_alike(leader.figures)
        self._generate(row)

    def leader_gone(self, error: "BaseException | None") -> None:
        """WAITING: the leader ended before it read the prompt."""
        self.leader = None
        self._end(error or Cancelled())

    def cancel_check(self) -> None:
        """A job cancelled while its prompt is read (or awaited) ends with nothing said."""
        if self.state in (SlotState.READING, SlotState.WAITING) and self.job.is_cancelled():
            self._end(Cancelled(self._computed()))

    def _computed(self) -> int:
        """Prompt tokens this slot computed for its job so far."""
        return self.figures.computed_tokens - len(self.pending) if self.figures else 0

    def failed(self, error: BaseException, stopped: bool = False) -> None:
        """The pass holding this step's tokens failed (`stopped`: its abort callback stopped
        it): what it queued is dropped (after a failure, all it held), and the job ends."""
        if stopped:
            self.cache.seq.abandon()
        else:
            self.cache.reset()   # what it holds is unknown after a failed pass
        self._end(error if not stopped else Cancelled(self._computed()))

    def _end(self, error: "BaseException | None" = None) -> None:
        job, followers, figures = self.job, self.followers, self.figures
        if self.leader is not None:
            self.leader.unlead(self)
        self._release()
        for follower in followers:
            follower.leader_gone(error)
        job.end(error, figures)

    def _release(self) -> None:
        if self.sampler is not None:
            self.sampler.close()
        self.state = SlotState.IDLE
        self._clear()
