"""Ctrl-C, SIGTERM and SIGHUP as requests to stop the answer, not exceptions in the middle of it.

While an answer streams (or its prompt is read), these signals only set a
flag that the engine checks; the partial answer is then kept. Ctrl-C stops
that answer; SIGTERM and SIGHUP also ask the program to quit once it is
saved, as `/quit` would (the KV of the finished turns is stored first), with
exit status 128 + the signal's number. A Ctrl-C while the first is still
not honoured after a second (every long step checks the flag more often)
raises KeyboardInterrupt as usual; repeats within that second (a key held
down, a storm of `kill -INT`) are the same request.

Between answers, `quit_on_signals` turns SIGTERM and SIGHUP into a Quit
exception, so the console unwinds (restoring the terminal) and closes.
"""

import signal
import threading
import time
from contextlib import contextmanager

QUIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Quit(BaseException):
    """SIGTERM or SIGHUP between answers: leave as /quit does."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.status = 128 + signum


STUCK_AFTER_S = 1.0  # a stop request not honoured by then: the next Ctrl-C raises


class StopFlag:
    def __init__(self):
        self.event = threading.Event()
        self.quit_status: "int | None" = None   # set by SIGTERM / SIGHUP
        self.since: "float | None" = None       # when the stop was first asked for

    def __call__(self) -> bool:
        return self.event.is_set()

    def ask(self) -> None:
        if self.since is None:
            self.since = time.monotonic()
        self.event.set()

    def stuck(self) -> bool:
        return self.since is not None and time.monotonic() - self.since > STUCK_AFTER_S


@contextmanager
def stop_on_sigint():
    flag = StopFlag()

    def handler(signum, frame):
        if signum in QUIT_SIGNALS:
            flag.quit_status = flag.quit_status or 128 + signum
        elif flag.stuck():
            raise KeyboardInterrupt
        flag.ask()

    with _handling((signal.SIGINT, *QUIT_SIGNALS), handler):
        yield flag


@contextmanager
def quit_on_signals():
    def handler(signum, frame):
        raise Quit(signum)

    with _handling(QUIT_SIGNALS, handler):
        yield


@contextmanager
def _handling(signals, handler):
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, handler) for signum in signals}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
