"""`chatdb serve`'s turns: requests wait in a queue; a thread of the engine's own steps the slots.

The front-end (the HTTP server) submits TurnRequests; the loop's thread
loads the engine, then, between steps of the scheduler (scheduler.py),
gives free slots waiting requests: their messages placed in the tree
(Engine.place: only what the archive lacks is added), each answer a job
(Engine.answer_job; a completion's raw prompt: Engine.completion_job). A
request of n answers waits, holding up those behind it, until n slots are
free; the other answers follow the first one's prompt. A cancelled request
ends at its slot's next step, its answer kept, marked interrupted. Threads
are re-checked against the free cores whenever a step follows a pause, as
the console does before each turn.

What a front-end calls: start, submit (False when full: the client hears
"busy"), busy, most_sequences, threads, memory_bytes, cancel_all (from a
signal handler too), close.
"""

import queue
import threading

from ..errors import Cancelled
from .job import Job
from .turn_request import TurnCancelled, TurnOutcome, TurnRequest


class RequestLoop:
    def __init__(self, open_engine, capacity: int):
        self.capacity = capacity
        self.requests: queue.Queue = queue.Queue()
        self.ready = threading.Event()
        self.engine = None
        self.failure: "Exception | None" = None
        self.held: "TurnRequest | None" = None     # waits for as many free slots as it has answers
        self._count = 0                            # answers running and waiting
        self._running: "list[TurnRequest]" = []   # each answer under way
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
    def slots(self) -> list:
        return self.engine.scheduler.slots if self.engine is not None else []

    @property
    def most_sequences(self) -> int:
        """The most sequences one forward pass has held so far."""
        return self.engine.scheduler.most_sequences if self.engine is not None else 0

    @property
    def threads(self) -> "dict | None":
        """The decode and batch threads in use (re-chosen whenever a step follows a pause)."""
        return self.engine.threads if self.engine is not None else None

    @property
    def memory_bytes(self) -> int:
        """Bytes of the recent chats' states kept in memory (all slots share them)."""
        if self.engine is None:
            return 0
        return sum(state.nbytes for _, state in list(self.engine.cache.memory.entries.values()))

    def submit(self, request: TurnRequest) -> bool:
        with self._lock:
            if self._count + request.answers > self.capacity or self._closing:
                return False
            self._count += request.answers
        self.requests.put(request)
        return True

    def cancel_all(self) -> None:
        """Take no more requests; cancel what waits, end running answers at their next step
        (each is kept, interrupted). Safe from a signal handler: it only sets flags."""
        self._closing = True
        for request in list(self.requests.queue) + [self.held]:
            if request is not None:
                for each in [request] + request.siblings:
                    each.cancelled.set()
        for answer in list(self._running):
            answer.cancelled.set()

    def close(self) -> None:
        """cancel_all(), then wait for the answers to be stored and their KV; free."""
        self.cancel_all()
        if self._thread.is_alive():
            self.requests.put(None)
            self._thread.join()

    # -- the loop's thread --------------------------------------------------------

    def _run(self, open_engine) -> None:
        try:
            self.engine = open_engine()
        except Exception as exc:  # reported by start()
            self.failure = exc
            self.ready.set()
            return
        self.ready.set()
        try:
            self._loop()
        finally:
            self.engine.close()
            self.engine.archive.close()

    def _loop(self) -> None:
        scheduler, stopping = self.engine.scheduler, False
        while not stopping or scheduler.busy:
            stopping = self._admit(block=not scheduler.busy and not stopping) or stopping
            if scheduler.busy:
                scheduler.step()

    def _admit(self, block: bool) -> bool:
        """Give free slots waiting requests; True once the close sentinel was seen."""
        scheduler = self.engine.scheduler
        while scheduler.free:
            request, self.held = self.held, None
            if request is None:
                try:
                    request = self.requests.get(block=block)
                except queue.Empty:
                    return False
                if request is None:
                    return True
            block = False
            if request.answers > scheduler.free:
                self.held = request
                return False
            self._begin(request)
        return False

    def _begin(self, request: TurnRequest) -> None:
        """Place the request and give each of its answers a slot."""
        answers, placed = [request] + request.siblings, []
        try:
            if request.cancelled.is_set():
                raise TurnCancelled()
            placement, jobs = self._jobs(request, placed)
        except Exception as exc:
            self._unplace(placed)
            for each in answers:
                self._ended(each, None, None, exc)
            return
        self._running.extend(answers)
        for job in jobs:
            if self.engine.scheduler.assign(job) is None and job is jobs[0]:
                self._unplace(placed)   # it could not start (its sampler refused, say)

    def _unplace(self, placed: list) -> None:
        """A request refused before any answer keeps none of its messages."""
        if placed:
            try:
                self.engine.unplace(placed[0])
            except Exception:   # e.g. a full disk: the question stays, the refusal is said
                pass

    def _jobs(self, request: TurnRequest, placed: list) -> "tuple[object, list[Job]]":
        """(its placement in the tree or None, a job for each of its answers); `placed` is
        given the placement as soon as it is made."""
        engine, jobs, placement = self.engine, [], None
        if request.prompt is None:
            placement = engine.place(request.messages, request.title, request.meta, request.tags,
                                     request.owner, request.share_prefix)
            placed.append(placement)
        for each in [request] + request.siblings:
            callbacks = dict(stop=list(each.stop), on_text=each.on_text, on_logprob=each.on_logprob,
                             cancelled=each.cancelled.is_set, follows=jobs[0] if jobs else None,
                             owner=request.owner,
                             on_end=lambda job, each=each: self._ended(each, placement, job))
            if placement is None:
                jobs.append(engine.completion_job(request.prompt, each.sampling, **callbacks))
            else:
                jobs.append(engine.answer_job(placement.conversation_id, placement.path[-1].id,
                                              each.sampling, **callbacks))
        return placement, jobs

    def _ended(self, request: TurnRequest, placement, job: "Job | None",
               error: "BaseException | None" = None) -> None:
        with self._lock:
            self._count -= 1
        if request in self._running:
            self._running.remove(request)
        error = error if job is None else job.error
        if isinstance(error, Cancelled):
            error = TurnCancelled()
        if error is not None:
            request.on_error(error)
        else:
            request.on_done(TurnOutcome(placement, job.result, job.figures.batch()))
