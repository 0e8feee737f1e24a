"""Reading one large JSON document a value at a time, in bounded memory.

An export is one array of conversations (or an object holding one), and
only the conversation being read need be in memory: JsonStream walks the
top level itself and decodes each element of that array with the standard
library's decoder (json.JSONDecoder.raw_decode), from a window of the text
that holds that element and little more. Every value is therefore exactly what
json.loads makes of it (lone surrogates from "\\ud800" included, which an
import must see to refuse, and integers of any size), and every error names
the line and column json.loads would.

    stream = JsonStream(handle.read)
    if stream.opens() == "[":
        for element in stream.elements():   # each decoded whole, one at a time
            ...
    stream.end()                            # nothing but whitespace after it

A value's text that would pass `limit` characters is refused (TooLarge)
before more is read: no element, however it lies, takes more memory.
"""

import json

CHUNK = 1 << 20          # bytes read at a time
WHITESPACE = " \t\n\r"
# An error this close to the end of the text read so far may be the text
# stopping, not the document being wrong (a partial "-Infinity" is 9 long).
NEAR_THE_END = 16
BOM = b"\xef\xbb\xbf"


class BadJSON(ValueError):
    """Text that is not JSON: what, and where as json.loads says it."""

    def __init__(self, msg: str, lineno: int, colno: int):
        super().__init__(f"{msg} (line {lineno}, column {colno})")
        self.msg, self.lineno, self.colno = msg, lineno, colno


class NotUTF8(ValueError):
    def __init__(self, offset: int):
        super().__init__(f"not UTF-8 at byte {offset}")
        self.offset = offset


class TooLarge(ValueError):
    """One value whose text is longer than the stream may hold at once."""

    def __init__(self, size: int, limit: int):
        super().__init__(f"a value of over {size} characters (at most {limit} are held)")
        self.size, self.limit = size, limit


class JsonStream:
    def __init__(self, read, limit: int = 1 << 62, chunk: int = CHUNK):
        self._read = read                # read(n) -> up to n bytes, b"" at the end
        self._limit = limit
        self._chunk = chunk
        self._decoder = json.JSONDecoder()
        self._text = ""                  # text read and not yet dropped...
        self._pos = 0                    # ...of which everything before this is consumed
        self._undecoded = b""            # a character cut by the end of a chunk
        self._bytes = 0                  # bytes read before _undecoded
        self._eof = False
        self._started = False
        # Where _text begins in the whole text, for errors: characters, newlines and
        # the index of the last newline before it.
        self._dropped, self._lines, self._last_newline = 0, 0, -1

    # -- the document's structure ----------------------------------------

    def opens(self) -> str:
        """The first character of the next value ('{', '[', or another), not consumed."""
        return self._peek()

    def value(self):
        """The next value, decoded whole."""
        self._skip_space()
        while True:
            try:
                value, end = self._decoder.raw_decode(self._text, self._pos)
            except json.JSONDecodeError as exc:
                if self._eof or not self._may_be_cut(exc):
                    raise self._error(exc.msg, exc.pos) from None
                self._more(len(self._text) - self._pos)
                continue
            # A number or a literal that ends near where the text read so far does
            # may go on ("1." then "5"): it is decided with a few characters after it.
            if (not self._eof and len(self._text) - end < NEAR_THE_END
                    and self._text[self._pos] not in '{["'):
                self._more(len(self._text) - self._pos)
                continue
            self._pos = end
            return value

    def elements(self):
        """Each element of the array that comes next, decoded whole, one at a time."""
        self._expect("[")
        if self._peek() == "]":
            self._pos += 1
            return
        while True:
            yield self.value()
            if not self._separator("]", "Expecting ',' delimiter"):
                return

    def members(self):
        """Each key of the object that comes next; the caller reads its value
        (value() or elements()) before asking for the next key."""
        self._expect("{")
        if self._peek() == "}":
            self._pos += 1
            return
        while True:
            if self._peek() != '"':
                raise self._error("Expecting property name enclosed in double quotes", self._pos)
            key = self.value()
            if self._peek() != ":":
                raise self._error("Expecting ':' delimiter", self._pos)
            self._pos += 1
            yield key
            if not self._separator("}", "Expecting ',' delimiter"):
                return

    def end(self) -> None:
        """Only whitespace may follow the document."""
        if self._peek() != "":
            raise self._error("Extra data", self._pos)

    # -- reading -----------------------------------------------------------

    def _separator(self, closing: str, problem: str) -> bool:
        """After an element: True at a ',' (another follows), False at `closing`."""
        found = self._peek()
        if found not in (",", closing):
            raise self._error(problem, self._pos)
        self._pos += 1
        return found == ","

    def _expect(self, char: str) -> None:
        if self._peek() != char:
            raise self._error("Expecting value", self._pos)
        self._pos += 1

    def _peek(self) -> str:
        """The next character that is not whitespace ('' at the end), not consumed."""
        self._skip_space()
        return self._text[self._pos] if self._pos < len(self._text) else ""

    def _skip_space(self) -> None:
        while True:
            text, pos = self._text, self._pos
            while pos < len(text) and text[pos] in WHITESPACE:
                pos += 1
            self._pos = pos
            if pos < len(text) or self._eof:
                return
            self._more(0)

    def _may_be_cut(self, exc: json.JSONDecodeError) -> bool:
        return (exc.pos >= len(self._text) - NEAR_THE_END
                or exc.msg.startswith("Unterminated string"))

    def _more(self, held: int) -> None:
        """Read on: at least a chunk, and as much as is held, so that a long value
        is decoded again only a few times. The consumed text is dropped first."""
        if held >= self._limit:
            raise TooLarge(held, self._limit)
        want = min(max(self._chunk, held), self._limit - held + 1)   # one past the limit finds it
        data = self._read(want)
        if not data:
            self._eof = True
        self._drop_consumed()
        self._text += self._decode(data)

    def _decode(self, data: bytes) -> str:
        data, self._undecoded = self._undecoded + data, b""
        if not self._started:
            if len(data) < len(BOM) and not self._eof and BOM.startswith(data):
                self._undecoded = data   # what may yet be a byte order mark
                return ""
            self._started = True
            if data.startswith(BOM):      # as json.loads after decode("utf-8-sig")
                data = data[len(BOM):]
                self._bytes = len(BOM)
        if not self._eof:
            data, self._undecoded = _split_last_character(data)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NotUTF8(self._bytes + exc.start) from None
        self._bytes += len(data)
        return text

    def _drop_consumed(self) -> None:
        dropped = self._text[:self._pos]
        newline = dropped.rfind("\n")
        if newline >= 0:
            self._lines += dropped.count("\n")
            self._last_newline = self._dropped + newline
        self._dropped += self._pos
        self._text, self._pos = self._text[self._pos:], 0

    def _error(self, msg: str, pos: int) -> BadJSON:
        """The error at `pos` in _text, with json.loads's line and column."""
        lineno = self._lines + self._text.count("\n", 0, pos) + 1
        newline = self._text.rfind("\n", 0, pos)
        colno = pos - newline if newline >= 0 else self._dropped + pos - self._last_newline
        return BadJSON(msg, lineno, colno)


def _split_last_character(data: bytes) -> tuple[bytes, bytes]:
    """(data up to its last whole UTF-8 character, the start of one cut off)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return data, b""
        if byte >= 0xC0:   # a lead byte: how long its character is
            length = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return (data, b"") if length <= back else (data[:-back], data[-back:])
    return data, b""
