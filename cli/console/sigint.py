"""SIGINT between answers, at a terminal: the prompt's Ctrl-C, or one KeyboardInterrupt per command.

Python's own handler raises KeyboardInterrupt wherever the main thread is,
and prompt_toolkit's (which it sets only while a prompt runs) queues a
Ctrl-C key that fails if the prompt has ended meanwhile: a storm of SIGINTs
(a key held down, `kill -INT` in a loop) printed asyncio's and
prompt_toolkit's tracebacks and left the next prompt unable to read Ctrl-D.
Here, while a prompt is shown (or starts, or ends), a SIGINT reaches it as
its Ctrl-C key if it is still reading, and is dropped otherwise; in a slow
command it raises KeyboardInterrupt once, which the console's loop catches.
An answer installs its own handler (cli.interrupt.stop_on_sigint).
"""

import signal
import threading
from contextlib import contextmanager

from prompt_toolkit.application.current import get_app_or_none


class ConsoleInterrupts:
    def __init__(self):
        self.in_command = False
        self.prompting = 0   # prompts shown (a question inside a command nests)

    @contextmanager
    def installed(self):
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = signal.signal(signal.SIGINT, self._handle)
        try:
            yield self
        finally:
            signal.signal(signal.SIGINT, previous)

    @contextmanager
    def command(self):
        """While the body runs, the first SIGINT raises KeyboardInterrupt (and only the first)."""
        self.in_command = True
        try:
            yield
        finally:
            self.in_command = False

    def prompt(self, session, *args, **kwargs):
        """session.prompt(...), its SIGINTs delivered by this handler."""
        self.prompting += 1
        try:
            return session.prompt(*args, handle_sigint=False, **kwargs)
        finally:
            self.prompting -= 1

    def _handle(self, signum, frame) -> None:
        if self.prompting:
            app = get_app_or_none()
            if app is not None and app.is_running and app.loop is not None:
                app.loop.call_soon_threadsafe(_press_ctrl_c, app)
        elif self.in_command:
            self.in_command = False  # once: a storm must not interrupt the handling of the first
            raise KeyboardInterrupt


def _press_ctrl_c(app) -> None:
    if app.is_running and app.future is not None and not app.future.done():
        app.key_processor.send_sigint()
