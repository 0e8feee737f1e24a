"""Slots stepped together: one forward pass per step holds what every busy slot computes next.

The one pipeline for a turn. The console's and `ask`'s turn is a scheduler
of one slot, run on the caller's thread (`run`); `chatdb serve` is one of N
slots, run on a thread of its own (request_loop.py); `chatdb warm` gives N
slots jobs that stop after reading their prompt (warming.py).

A step: every generating slot adds its next token and its drafted guesses;
slots reading a prompt share what room is left in equal parts (share), in
arrival order; the batch is decoded once, in sequence order (llama.cpp
keeps consecutive sequence ids in one pass); then each slot reads back its
own rows. With more than one slot the prompt tokens of a step are paced
(prefill_pace.py), so a request arriving meanwhile joins at the next step
and the answers being generated keep their pace; one slot reads in whole
batches. A pass that holds one slot reading its prompt alone can be stopped
within a graph node (Ctrl-C: llama.cpp's abort callback asks the job).

`on_resume` runs when a step follows a pause (threads re-chosen for the
free cores now), `on_pause(timings)` when the last busy slot ends, with
(rows, cells, ms) of each pass that held one generating slot alone;
`on_shared(sequences, rows, ms)` after each pass that held several, all
generating (what a drafted row costs beside the others is learned from them).
"""

import time

from ..errors import Cancelled, EngineError
from ..llama.batch import MultiBatch
from .job import Job
from .prefill_pace import PrefillPace, share
from .slot import Slot, SlotState

ONGOING = (SlotState.GENERATING, SlotState.STORING)


class Scheduler:
    def __init__(self, model, slots: list[Slot], paced: bool = False, clock=time.perf_counter,
                 on_resume=None, on_pause=None, on_shared=None):
        self.model, self.slots, self.clock = model, slots, clock
        self.batch = MultiBatch(model, model.config.n_batch)
        self.pace = PrefillPace(self.batch.capacity) if paced else None
        self.on_resume, self.on_pause, self.on_shared = on_resume, on_pause, on_shared
        self.timings: list = []

    @property
    def busy(self) -> list[Slot]:
        return [s for s in self.slots if s.busy]

    @property
    def free(self) -> int:
        return sum(1 for s in self.slots if not s.busy)

    @property
    def most_sequences(self) -> int:
        """The most sequences one forward pass has held so far."""
        return self.batch.most_sequences

    # -- jobs ----------------------------------------------------------------------------

    def run(self, job: Job):
        """Run `job` on this thread until it ends; its result (or its error raised)."""
        self.assign(job)
        try:
            while self.busy:
                self.step()
        except BaseException as exc:   # a second Ctrl-C, say: what was queued is not held
            for slot in self.busy:
                slot.failed(exc, stopped=True)
            raise
        return job.outcome()

    def assign(self, job: Job) -> "Slot | None":
        """Give `job` the best free slot (one following another job waits beside the slot
        reading that job's prompt); None, and the job ended with the error, if it could
        not start."""
        if not self.busy and self.on_resume is not None:
            self.on_resume()
        leader = (next((s for s in self.slots if s.job is job.follows), None)
                  if job.follows is not None else None)
        slot = self._best_slot(job)
        try:
            if job.follows is not None and leader is None:
                raise Cancelled()   # the job it follows ended before this one started
            slot.start(job, leader)
        except Exception as exc:
            job.end(exc)
            self._paused_if_idle()
            return None
        return slot

    def _best_slot(self, job: Job) -> Slot:
        """The free slot that keeps the busy sequences in one run of ids, and of those the
        one already holding most of the prompt.

        With a KV stream per sequence, llama.cpp splits a batch into one pass per
        run of consecutive sequence ids (a stream view must be contiguous), so a
        hole in the busy ids costs a whole extra pass every step of every turn;
        a prefix left in another slot costs at most one restore, from memory
        or the archive.
        """
        free = [s for s in self.slots if not s.busy]
        if not free:
            raise EngineError("no free slot for the job")
        return min(free, key=lambda s: (self._runs_with(s), -s.holds(job.prompt, job.owner)))

    def _runs_with(self, chosen: Slot) -> int:
        """Runs of consecutive busy slots if `chosen` were busy too."""
        busy = [s.busy or s is chosen for s in self.slots]
        return sum(1 for i, b in enumerate(busy) if b and (i == 0 or not busy[i - 1]))

    # -- a step -----------------------------------------------------------------------------

    def step(self) -> None:
        """One forward pass for every busy slot."""
        for slot in self.busy:
            slot.cancel_check()
        stepped = self._plan()
        if not stepped:
            if self.busy and any(s.state != SlotState.WAITING for s in self.busy):
                for slot in self.busy:   # a bug, not a hang
                    slot.failed(EngineError("busy slots with nothing to compute"))
            return self._paused_if_idle()
        for slot in stepped:   # in sequence order
            slot.queue(self.batch)
        alone = stepped[0] if len(stepped) == 1 else None
        cells = alone.cells if alone is not None and alone.state == SlotState.GENERATING else None
        generating = len(stepped) > 1 and all(s.state == SlotState.GENERATING for s in stepped)
        tokens, started, ticked = self.batch.queued, time.perf_counter(), self.clock()
        try:
            held = self.batch.decode(alone.abort if alone is not None else None)
        except Cancelled as exc:
            alone.failed(exc, stopped=True)
            return self._paused_if_idle()
        except Exception as exc:   # a fault of ours: the jobs under way hear of it
            for slot in stepped:
                slot.failed(exc)
            return self._paused_if_idle()
        ms = (self.clock() - ticked) * 1000
        if self.pace is not None:
            self.pace.record(tokens, time.perf_counter() - started)
        if cells is not None:
            self.timings.append((tokens, cells, ms))
        elif generating and self.on_shared is not None:
            self.on_shared(len(stepped), tokens, ms)
        for slot in stepped:
            try:
                slot.decoded(held)
            except Exception as exc:   # its sampler or its job failed: that job alone ends
                slot.failed(exc)
        self._paused_if_idle()

    def _plan(self) -> list[Slot]:
        """Every busy slot chooses its tokens for this step; those that have any."""
        busy, room = self.busy, self.batch.capacity
        ongoing = [s for s in busy if s.state in ONGOING]
        shared = sum(1 for s in busy if s.state in ONGOING or s.state == SlotState.READING) - 1
        for i, slot in enumerate(ongoing):   # a token each for those after it, at least
            room -= self._planned(slot, room - (len(ongoing) - 1 - i), shared=shared)
        reading = sorted((s for s in busy if s.state == SlotState.READING),
                         key=lambda s: s.arrived)
        if reading:   # steps of generating slots alone, most of a turn's, skip the pacing
            budget = room if self.pace is None else min(room, self.pace.chunk())
            for slot, given in zip(reading, share([s.wants(room) for s in reading],
                                                  max(0, budget))):
                self._planned(slot, room, given)
        return [s for s in busy if s.busy and s.planned]

    @staticmethod
    def _planned(slot: Slot, room: int, prompt_share: int = 0, shared: int = 0) -> int:
        """The tokens `slot` plans this step (0 if planning failed: its job ends); `shared`:
        the other slots that may compute in the same pass."""
        try:
            return slot.plan(room, prompt_share, shared)
        except Exception as exc:   # its drafter failed, say
            slot.failed(exc)
            return 0

    def _paused_if_idle(self) -> None:
        if not self.busy:
            timings, self.timings = self.timings, []
            if self.on_pause is not None:
                self.on_pause(timings)

    def close(self) -> None:
        self.batch.close()
