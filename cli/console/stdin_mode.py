'''The console without a terminal: messages and commands read from stdin.

One message per line; a line `"""` starts a multi-line message and the next
such line ends it. Slash commands work as at the prompt; a question they ask
(/delete's confirmation) is answered by the next line, and /edit N without
TEXT takes the next message as the new text. Each answer is printed to
stdout as it streams. The exit status is 1 if any line failed, else 0.

    printf 'Hi!\\n/stats\\n' | chatdb -c
'''

import sys

from ..text_input import NotText, decode
from . import dispatch
from .frontend import Frontend

FENCE = '"""'


class LineSource:
    """Lines of a text stream, or of a byte stream decoded line by line (sys.stdin.buffer)."""

    def __init__(self, stream):
        self.lines = iter(stream)
        self.number = 0
        self.bad: "NotText | None" = None   # the first undecodable line of the current message

    def next_line(self) -> "str | None":
        line = next(self.lines, None)
        if line is None:
            return None
        self.number += 1
        if isinstance(line, bytes):
            try:
                line = decode(line, f"stdin line {self.number}")
            except NotText as exc:
                self.bad = self.bad or exc
                line = line.decode("utf-8", errors="replace")
        return line.rstrip("\r\n")

    def next_message(self) -> "str | None":
        """The next non-blank line, or fenced block; None at the end of input.

        NotText, once the whole message is read, if any of its lines is not UTF-8.
        """
        self.bad = None
        while (line := self.next_line()) is not None:
            if line.strip() == FENCE:
                return self._checked(self._block())
            if line.strip():
                return self._checked(line)
        return None

    def _checked(self, message: str) -> str:
        if self.bad is not None:
            raise self.bad
        return message

    def _block(self) -> str:
        body = []
        while (line := self.next_line()) is not None and line.strip() != FENCE:
            body.append(line)
        return "\n".join(body)


class StdinFrontend(Frontend):
    def __init__(self, source: LineSource, render):
        self.source, self.render = source, render

    def confirm(self, question: str) -> bool:
        answer = self.source.next_line() or ""
        self.render.info(f"{question.rstrip()} {answer.strip()}")
        return answer.strip().casefold() in ("y", "yes")

    def edit_text(self, text: str) -> "str | None":
        return self.source.next_message()


def run(session, stream=None) -> int:
    source = LineSource(stream if stream is not None else sys.stdin.buffer)
    session.use_frontend(StdinFrontend(source, session.render))
    while not session.quitting:
        try:
            message = source.next_message()
        except NotText as exc:  # that message fails; the next line is read as usual
            dispatch.fail(session, str(exc))
            continue
        if message is None:
            break
        dispatch.handle(session, message)
    return 1 if session.errors else 0
