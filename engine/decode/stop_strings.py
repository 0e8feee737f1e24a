"""Stop strings: end an answer where any of them appears, and never stream it.

Text that could be the start of a stop string is held back until the next
piece shows whether it is; the answer keeps the text before the stop.
"""


class StopText:
    def __init__(self, stops: "list[str] | None"):
        self.stops = [s for s in (stops or []) if s]
        self.keep = max((len(s) for s in self.stops), default=1) - 1
        self.firsts = {s[0] for s in self.stops}   # a held tail starts with one of these
        self.pending = ""
        self.hit = False

    def feed(self, text: str) -> str:
        """The part of `text` (after what was held) that is safe to stream."""
        if not self.stops:
            return text
        buffer = self.pending + text
        cut = min((i for i in (buffer.find(s) for s in self.stops) if i >= 0), default=-1)
        if cut >= 0:
            self.hit, self.pending = True, ""
            return buffer[:cut]
        hold = self._held(buffer)
        self.pending = buffer[len(buffer) - hold:] if hold else ""
        return buffer[:len(buffer) - hold]

    def _held(self, buffer: str) -> int:
        """Length of the longest tail of `buffer` that starts some stop string.

        Called for every token: only tails beginning with a stop string's first character
        are tried (found by str.find), so text with none of them costs a find or two."""
        at = self._next_first(buffer, max(0, len(buffer) - self.keep))
        while at >= 0:
            tail = buffer[at:]
            if any(s.startswith(tail) for s in self.stops):
                return len(tail)
            at = self._next_first(buffer, at + 1)
        return 0

    def _next_first(self, buffer: str, start: int) -> int:
        """Where a stop string's first character next appears from `start` (-1: nowhere)."""
        return min((i for i in (buffer.find(c, start) for c in self.firsts) if i >= 0),
                   default=-1)

    def flush(self) -> str:
        """What was held back, at the end of an answer that met no stop string."""
        rest, self.pending = self.pending, ""
        return rest
