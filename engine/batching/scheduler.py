"""Continuous batching: several turns share one model, one context, one forward pass per step.

Each slot (slot.py) is one sequence of the shared llama.cpp context, with
its own KVCache (restored from the live prefix, memory or the archive, as
in the console) and the turn it answers. A step decodes, in one
llama_decode, one token of every slot that is generating plus chunks of
the prompts of slots still reading theirs (in equal parts),
sized so a step stays short (prefill_pace.py: a request arriving meanwhile
joins at the next step, and the answers being generated keep their pace);
then every generating slot samples
its next token from its own row of logits. A finished slot stores its
answer and KV and takes the next waiting turn; a cancelled one ends at its
next step, its answer kept, marked interrupted.

Speculative decoding is not used here: one token per sequence per step.
Threads are re-checked against the free cores whenever a batch starts
after a pause, as the console does before each turn.

What a front-end calls: start, submit (False when full: the client hears "busy"), busy,
close.
"""

import queue
import threading
import time

import numpy as np

from chatdb.message_match import place, unplace

from ..decode.modes import Finish
from ..errors import Cancelled
from ..kv.sources import common_prefix
from ..llama.batch import MultiBatch
from ..prompt.prepared import RawPrompt
from ..turn_result import raw_result
from .prefill_pace import PrefillPace, share
from .slot import Slot
from .turn_request import TurnRequest, TurnCancelled, TurnOutcome


class SlotScheduler:
    def __init__(self, open_engine, parallel: int, capacity: int):
        self.parallel, self.capacity = parallel, capacity
        self.jobs: queue.Queue = queue.Queue()
        self.ready = threading.Event()
        self.engine = None
        self.batch: "MultiBatch | None" = None
        self.pace: "PrefillPace | None" = None
        self.failure: "Exception | None" = None
        self.slots: list[Slot] = []
        self._count = 0                       # answers running and waiting
        self.held: "TurnRequest | None" = None       # waits for as many free slots as it has answers
        self._lock = threading.Lock()
        self._closing = False
        self._thread = threading.Thread(target=self._run, args=(open_engine,),
                                        name="chatdb-slots", daemon=True)

    # -- what a front-end calls ---------------------------------------------------

    def start(self) -> None:
        """Load the engine (on its thread); returns when it is ready or has failed."""
        self._thread.start()
        self.ready.wait()
        if self.failure is not None:
            raise self.failure

    @property
    def busy(self) -> int:
        return self._count

    @property
    def most_sequences(self) -> int:
        """The most sequences one forward pass has held so far."""
        return self.batch.most_sequences if self.batch is not None else 0

    @property
    def threads(self) -> "dict | None":
        """The decode and batch threads in use (re-chosen whenever a batch starts after a pause)."""
        if self.engine is None:
            return None
        model = self.engine.model
        return {"decode": model.config.n_threads, "batch": model.threads_batch}

    def submit(self, turn: TurnRequest) -> bool:
        with self._lock:
            if self._count + turn.answers > self.capacity or self._closing:
                return False
            self._count += turn.answers
        self.jobs.put(turn)
        return True

    def cancel_all(self) -> None:
        """Take no more turns; cancel what waits, end running answers at their next step
        (each is kept, interrupted). Safe from a signal handler: it only sets flags."""
        self._closing = True
        for turn in list(self.jobs.queue) + [self.held]:
            if turn is not None:
                turn.cancelled.set()
        for slot in self.slots:
            if slot.turn is not None:
                slot.turn.cancelled.set()

    def close(self) -> None:
        """cancel_all(), then wait for the answers to be stored and their KV; free."""
        self.cancel_all()
        if self._thread.is_alive():
            self.jobs.put(None)
            self._thread.join()

    # -- the scheduler's thread -------------------------------------------------

    def _run(self, open_engine) -> None:
        try:
            self.engine = engine = open_engine()
            n = min(self.parallel, engine.model.config.n_seq_max)   # the model may allow fewer
            self.slots = [Slot(engine.cache)] + [Slot(engine.cache.sibling(i)) for i in range(1, n)]
            self.batch = MultiBatch(engine.model, engine.model.config.n_batch)
            self.pace = PrefillPace(self.batch.capacity)
        except Exception as exc:  # reported by start()
            self.failure = exc
            self.ready.set()
            return
        self.ready.set()
        try:
            self._loop()
        finally:
            self.batch.close()
            for slot in self.slots[1:]:
                slot.cache.close()
            self.engine.close()
            self.engine.archive.close()

    def _loop(self) -> None:
        stopping = False
        while not stopping or self._busy_slots():
            idle = not self._busy_slots()
            stopping = self._admit(block=idle and not stopping) or stopping
            if idle and self._busy_slots():
                self.engine.tuning.before_turn()   # after a pause: threads for the free cores now
            if self._busy_slots():
                try:
                    self._step()
                except Exception as exc:  # a fault of ours: the turns under way hear of it
                    for slot in self._busy_slots():
                        slot.cache.reset()
                        self._end(slot, error=exc)
                if not self._busy_slots():
                    self.engine.tuning.after_turn([])   # idle from here (no drafting to refine)

    def _busy_slots(self) -> list[Slot]:
        return [s for s in self.slots if not s.free]

    def _admit(self, block: bool) -> bool:
        """Give free slots waiting turns; True once the close sentinel was seen. A turn
        of n answers waits, holding up those behind it, until n slots are free."""
        while any(s.free for s in self.slots):
            turn, self.held = self.held, None
            if turn is None:
                try:
                    turn = self.jobs.get(block=block)
                except queue.Empty:
                    return False
                if turn is None:
                    return True
            block = False
            if turn.answers > sum(s.free for s in self.slots):
                self.held = turn
                return False
            self._begin(turn)
        return False

    def _begin(self, turn: TurnRequest) -> None:
        engine, placement = self.engine, None
        try:
            if turn.cancelled.is_set():
                raise TurnCancelled()
            if turn.prompt is not None:
                return self._begin_raw(turn)
            placement = place(engine.archive, turn.messages, turn.title, turn.meta)
            parts, path = engine.start_answer(placement.conversation_id, placement.path[-1].id,
                                              turn.sampling)
            prepared = engine.prepare_turn(parts, path, turn.sampling)
            slot = self._best_slot(prepared.prompt)
            acquired = slot.cache.restore(prepared.prompt, prepared.window.tokens,
                                          window_key=prepared.key)
            slot.begin(turn, placement, parts, prepared, acquired, engine.model,
                       engine.chat_format.markers)
        except Exception as exc:
            if placement is not None:   # refused before any answer: keep none of its messages
                try:
                    unplace(engine.archive, placement)
                except Exception:   # e.g. a full disk: the question stays, the refusal is said
                    pass
            for each in [turn] + turn.siblings:
                self._finished(each, error=exc)
            return
        for sibling in turn.siblings:   # their slots were free when the turn was admitted
            self._best_slot(prepared.prompt).follow(sibling, slot, engine.model,
                                                    engine.chat_format.markers)

    def _begin_raw(self, turn: TurnRequest) -> None:
        """A completion: its prompt's KV from the live prefix or memory, nothing placed."""
        prepared = RawPrompt(np.asarray(turn.prompt, np.int32))
        slot = self._best_slot(prepared.prompt)
        acquired = slot.cache.restore(prepared.prompt, None)
        slot.begin(turn, None, None, prepared, acquired, self.engine.model, [])
        for sibling in turn.siblings:
            self._best_slot(prepared.prompt).follow(sibling, slot, self.engine.model, [])

    def _best_slot(self, prompt) -> Slot:
        """The free slot that keeps the busy sequences in one run of ids, and of those the
        one already holding most of the prompt.

        With a KV stream per sequence, llama.cpp splits a batch into one pass per
        run of consecutive sequence ids (a stream view must be contiguous), so a
        hole in the busy ids costs a whole extra pass every step of every turn;
        a prefix left in another slot costs at most one restore, from memory
        or the archive.
        """
        free = [s for s in self.slots if s.free]
        return min(free, key=lambda s: (self._runs_with(s), -common_prefix(s.seq.tokens, prompt)))

    def _runs_with(self, chosen: Slot) -> int:
        """Runs of consecutive busy slots if `chosen` were busy too."""
        busy = [not s.free or s is chosen for s in self.slots]
        return sum(1 for i, b in enumerate(busy) if b and (i == 0 or not busy[i - 1]))

    def _step(self) -> None:
        """One forward pass for every busy slot."""
        for slot in self._busy_slots():
            if slot.turn.cancelled.is_set() and not slot.generating:
                self._end(slot, error=TurnCancelled())  # gone while its prompt was read
        active = self._busy_slots()
        generating = [s for s in active if s.generating]
        reading = sorted((s for s in active if s.reading), key=lambda s: s.compute_started)
        fed = self._prompt_parts(reading)
        parts = {slot.seq.seq_id: part for slot, part in fed}
        for slot in active:   # in sequence order: llama.cpp keeps consecutive ids in one pass
            if slot.seq.seq_id in parts:
                part = parts[slot.seq.seq_id]
                slot.logits_at = self.batch.add(slot.seq.seq_id, part.tolist(),
                                                len(slot.seq.tokens), len(part) == len(slot.pending))
            elif slot.generating:
                slot.logits_at = self.batch.add(slot.seq.seq_id, [slot.next_token],
                                                len(slot.seq.tokens), True)
        tokens, started = self.batch.queued, time.perf_counter()
        try:
            sequences = self.batch.decode()
            self.pace.record(tokens, time.perf_counter() - started)
        except Exception as exc:
            for slot in active:
                slot.cache.reset()    # what it holds is unknown after a failed step
                self._end(slot, error=exc)
            return
        for slot in generating:
            slot.seq.mark_decoded([slot.next_token])
            slot.passed(sequences, reading=False)
        for slot, part in fed:
            slot.fed(part)
            slot.passed(sequences, reading=True)
        # Other answers to a prompt read in this step start from its KV and its logits.
        started = [s for s in active if s.following is not None and s.following.generating]
        for slot in started:
            slot.take_prompt()
        stepped = generating + [s for s, _ in fed if s.generating] + started
        # Every slot samples before any finishes: finishing feeds the answer's tail to
        # its sequence, a decode of its own that replaces this step's logits.
        ended = [s for s in stepped if s.sample(self.engine.model.ctx, self.engine.model.n_ctx)]
        for slot in ended:
            self._finish(slot)

    def _prompt_parts(self, reading: list[Slot]) -> list:
        """The chunks of the prompts being read (in arrival order) this step: [(slot, part)]."""
        room = self.batch.room - sum(1 for s in self.slots if s.generating)
        wanted = [len(slot.chunk(room)) for slot in reading]
        shares = share(wanted, max(0, min(room, self.pace.chunk())))
        return [(slot, slot.chunk(given)) for slot, given in zip(reading, shares) if given]

    def _finish(self, slot: Slot) -> None:
        gen = slot.generation()
        try:
            if slot.parts is None:   # a completion: nothing is stored
                if gen.finish == Finish.CANCELLED and not gen.tokens:
                    raise TurnCancelled()
                result = raw_result(gen, slot.acquired, len(slot.prepared.prompt),
                                    slot.compute_started)
            else:
                result = self.engine.finish_turn(slot.parts, slot.prepared, gen, slot.acquired,
                                                 slot.cache, {})
        except Exception as exc:
            self._end(slot, error=exc)
            return
        self._end(slot, outcome=TurnOutcome(slot.placement, result, slot.figures))

    def _end(self, slot: Slot, outcome=None, error=None) -> None:
        turn = slot.turn
        if turn is None:
            return
        slot.release()
        self._finished(turn, outcome, error)
        for other in self.slots:   # answers still waiting for this one's prompt
            if other.following is slot:
                self._end(other, error=error or TurnCancelled())

    def _finished(self, turn: TurnRequest, outcome=None, error=None) -> None:
        with self._lock:
            self._count -= 1
        if isinstance(error, Cancelled):
            error = TurnCancelled()
        if error is not None:
            turn.on_error(error)
        else:
            turn.on_done(outcome)
