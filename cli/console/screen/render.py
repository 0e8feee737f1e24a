"""How the console writes: answers streamed in colour, dim figures, notes and errors.

Answers and what commands print go to stdout; what is said about them (the
welcome, the figures after each answer, progress, warnings, errors) goes to
stderr, so `chatdb < questions.txt > answers.txt` keeps only the answers.
Colour only where cli.output.use_color allows it: a terminal, NO_COLOR
unset, TERM not "dumb".
"""

import sys
import threading
import time

from ... import output

ANSWER, ERROR, WARNING, MARKED = "\x1b[36m", "\x1b[31m", "\x1b[33m", "\x1b[1;32m"
RESET = output.RESET
CLEAR_LINE = "\r\x1b[2K"
# Control characters but newline and tab, as a table built once (not per token).
STREAM_TABLE = {c: None for c in output.CONTROL if chr(c) not in "\n\t"}


class Renderer:
    def __init__(self, out=None, err=None, color: "bool | None" = None):
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.color = output.use_color(self.out) if color is None else color
        self.err_color = self.color and output.use_color(self.err)
        self.err_tty = hasattr(self.err, "isatty") and self.err.isatty()

    # -- answers ---------------------------------------------------------------

    def begin_answer(self) -> None:
        if self.color:
            self.out.write(ANSWER)

    def stream(self, text: str) -> None:
        """One piece of an answer, as generated (the hot path: one write, one flush)."""
        self.out.write(text.translate(STREAM_TABLE))
        self.out.flush()

    def end_answer(self, interrupted: bool) -> None:
        if self.color:
            self.out.write(RESET)
        if interrupted:
            self.out.write(" " + self.paint("[interrupted]", WARNING))
        self.out.write("\n")
        self.out.flush()

    # -- command output (stdout) -------------------------------------------------

    def line(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def paint(self, text: str, code: str) -> str:
        return f"{code}{text}{RESET}" if self.color else text

    def bold(self, text: str) -> str:
        return output.bold(text, self.color)

    def dim(self, text: str) -> str:
        return output.dim(text, self.color)

    # -- about the output (stderr) ---------------------------------------------

    def note(self, text: str) -> None:
        """A dim line: figures after an answer, the welcome, what a command did."""
        self._err(output.dim(text, self.err_color))

    def info(self, text: str) -> None:
        self._err(text)

    def warning(self, message: str) -> None:
        text = f"warning: {output.one_line(message)}"
        self._err(f"{WARNING}{text}{RESET}" if self.err_color else text)

    def error(self, message: str) -> None:
        text = f"error: {output.one_line(message)}"
        self._err(f"{ERROR}{text}{RESET}" if self.err_color else text)

    def _err(self, text: str) -> None:
        self.out.flush()
        self.err.write(text + "\n")
        self.err.flush()


class Waiting:
    """A progress line on stderr that shows only once something takes over `delay` seconds.

    It is redrawn in place with the elapsed time and the latest detail
    (prefill progress), and erased by stop() before the answer is written.
    Only on a terminal: in a log, the figures after each answer say as much.
    """

    def __init__(self, render: Renderer, label: str, delay: float = 1.0):
        self.render, self.label, self.delay = render, label, delay
        self.detail = ""
        self._done = threading.Event()
        self._shown = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="chatdb-waiting", daemon=True)

    def start(self) -> "Waiting":
        self.started = time.perf_counter()
        if not self.render.err_tty:
            self._done.set()
            return self
        self._thread.start()
        return self

    def update(self, detail: str) -> None:
        self.detail = detail

    def stop(self) -> None:
        if self._done.is_set():
            return
        self._done.set()
        self._thread.join()
        with self._lock:
            if self._shown and self.render.err_tty:
                self.render.err.write(CLEAR_LINE)
                self.render.err.flush()

    def __enter__(self) -> "Waiting":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _run(self) -> None:
        if self._done.wait(self.delay):
            return
        while True:
            with self._lock:
                self._draw()
            if self._done.wait(0.1):
                return

    def _draw(self) -> None:
        elapsed = time.perf_counter() - self.started
        text = f"{self.label}{': ' + self.detail if self.detail else ''} ({elapsed:.1f} s)"
        self.render.err.write(CLEAR_LINE + output.dim(text, self.render.err_color))
        self.render.err.flush()
        self._shown = True
