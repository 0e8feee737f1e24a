"""Ctrl-C as a request to stop the answer, not an exception in the middle of it.

While an answer streams, SIGINT only sets a flag that the engine checks at
every token; the partial answer is then kept. A second Ctrl-C while the
first is honoured raises KeyboardInterrupt as usual.
"""

import signal
import threading
from contextlib import contextmanager


class StopFlag:
    def __init__(self):
        self.event = threading.Event()

    def __call__(self) -> bool:
        return self.event.is_set()


@contextmanager
def stop_on_sigint():
    flag = StopFlag()

    def handler(signum, frame):
        if flag.event.is_set():
            raise KeyboardInterrupt
        flag.event.set()

    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)
