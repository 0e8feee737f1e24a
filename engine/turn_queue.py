"""Turns from many clients, answered by one engine on its own thread, in arrival order.

The engine (model, context, archive connection) is created on that thread
and only used there. `submit` refuses a turn when `capacity` turns are
already running or waiting, so a front-end can answer "busy" at once.
"""

import queue
import threading

from .turns import Turn, run_turn


class TurnQueue:
    def __init__(self, open_engine, capacity: int):
        self.capacity = capacity
        self.jobs: queue.Queue = queue.Queue()
        self.ready = threading.Event()
        self.engine = None
        self.failure: "Exception | None" = None
        self._count = 0                       # running and waiting
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, args=(open_engine,),
                                        name="chatdb-turns", daemon=True)

    def start(self) -> None:
        """Load the engine (on its thread); returns when it is ready or has failed."""
        self._thread.start()
        self.ready.wait()
        if self.failure is not None:
            raise self.failure

    @property
    def busy(self) -> int:
        return self._count

    def submit(self, turn: Turn) -> bool:
        with self._lock:
            if self._count >= self.capacity:
                return False
            self._count += 1
        self.jobs.put(turn)
        return True

    def close(self) -> None:
        """Cancel what still waits, store the KV of what ran, free the model."""
        for turn in list(self.jobs.queue):
            if turn is not None:
                turn.cancelled.set()
        if self._thread.is_alive():
            self.jobs.put(None)
            self._thread.join()

    def _run(self, open_engine) -> None:
        try:
            self.engine = open_engine()
        except Exception as exc:  # reported by start()
            self.failure = exc
            self.ready.set()
            return
        self.ready.set()
        try:
            while (turn := self.jobs.get()) is not None:
                self._answer(turn)
        finally:
            self.engine.close()
            self.engine.archive.close()

    def _answer(self, turn: Turn) -> None:
        try:
            outcome = run_turn(self.engine, turn)
        except Exception as exc:  # the client hears of it; the queue goes on
            self._finished()
            turn.on_error(exc)
            return
        self._finished()
        turn.on_done(outcome)

    def _finished(self) -> None:
        with self._lock:
            self._count -= 1
