"""Text from the command line and stdin must be UTF-8: say where it is not.

Python hands over undecodable argv bytes as lone surrogates (U+DC80..U+DCFF)
and stdin's as a UnicodeDecodeError; either would end deep inside SQLite or
the tokenizer as a traceback. Checked here, they are one line naming what
and where. File paths are exempt: a path may be any bytes.
"""

import sys

from chatdb.errors import BadInput

PATH_OPTIONS = frozenset({"db", "model", "draft_model", "output", "file"})


class NotText(BadInput):
    """Input that is not valid UTF-8 text: the user must change it (exit status 2)."""


def check_arguments(args) -> None:
    """Every text argument of a parsed command line is valid UTF-8 (else NotText)."""
    for name, value in vars(args).items():
        if name in PATH_OPTIONS:
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                check(item, _argument_name(name))


def check(text: str, what: str) -> str:
    """`text` itself, if it encodes as UTF-8 (else NotText naming `what` and the place)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start]
        byte = ord(bad) - 0xDC00 if 0xDC80 <= ord(bad) <= 0xDCFF else None
        detail = f"byte 0x{byte:02x}" if byte is not None else f"lone surrogate U+{ord(bad):04X}"
        raise NotText(f"{what} is not valid UTF-8 text ({detail} at character {exc.start + 1})") from None
    return text


def decode(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        place = f"offset {exc.start}"
        if b"\n" in data.rstrip(b"\r\n"):
            line = data.count(b"\n", 0, exc.start) + 1
            place += f", line {line}"
        raise NotText(f"{what} is not valid UTF-8 text (byte 0x{data[exc.start]:02x} at {place})"
                      ) from None


def read_stdin() -> str:
    """All of stdin as text."""
    return decode(sys.stdin.buffer.read(), "stdin")


def _argument_name(name: str) -> str:
    named = {"text": "the message", "query": "the search query", "title": "the title",
             "conv": "CONV", "convs": "CONV", "message": "MESSAGE", "tags": "the tag"}
    return named.get(name, f"--{name.replace('_', '-')}")
