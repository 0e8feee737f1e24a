"""A progress bar on stderr, for a terminal only: in a pipe or a log it writes nothing.

Redrawn in place (carriage return), at most once per percent; no colour.
"""

import os
import sys

WIDTH = 30


class ProgressBar:
    def __init__(self, label: str, stream=None, unit: str = "tokens"):
        self.label, self.stream, self.unit = label, stream or sys.stderr, unit
        self.shown = (hasattr(self.stream, "isatty") and self.stream.isatty()
                      and os.environ.get("TERM") != "dumb")
        self._drawn: "tuple[int, int] | None" = None

    def update(self, done: int, total: int) -> None:
        if not self.shown:
            return
        percent = 100 * done // total if total else 100
        if self._drawn == (percent, total):
            return
        self._drawn = (percent, total)
        filled = WIDTH * percent // 100
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (WIDTH - filled)}] "
                          f"{done:,}/{total:,} {self.unit}")
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line, so what follows starts on its own."""
        if self.shown and self._drawn is not None:
            self.stream.write("\n")
            self.stream.flush()
