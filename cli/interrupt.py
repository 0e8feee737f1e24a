"""Ctrl-C, SIGTERM and SIGHUP as requests to stop the answer, not exceptions in the middle of it.

While an answer streams (or its prompt is read), these signals only set a
flag that the engine checks; the partial answer is then kept. Ctrl-C stops
that answer; SIGTERM and SIGHUP also ask the program to quit once it is
saved, as `/quit` would (the KV of the finished turns is stored first), with
exit status 128 + the signal's number. A second Ctrl-C while the first is
honoured raises KeyboardInterrupt as usual.

Between answers, `quit_on_signals` turns SIGTERM and SIGHUP into a Quit
exception, so the console unwinds (restoring the terminal) and closes.
"""

import signal
import threading
from contextlib import contextmanager

QUIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Quit(BaseException):
    """SIGTERM or SIGHUP between answers: leave as /quit does."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.status = 128 + signum


class StopFlag:
    def __init__(self):
        self.event = threading.Event()
        self.quit_status: "int | None" = None   # set by SIGTERM / SIGHUP

    def __call__(self) -> bool:
        return self.event.is_set()


@contextmanager
def stop_on_sigint():
    flag = StopFlag()

    def handler(signum, frame):
        if signum in QUIT_SIGNALS:
            flag.quit_status = flag.quit_status or 128 + signum
        elif flag.event.is_set():
            raise KeyboardInterrupt
        flag.event.set()

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
