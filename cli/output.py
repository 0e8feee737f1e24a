"""How the commands write: one JSON document, plain text, one-line errors.

Colour only where it can be seen: stdout is a terminal, NO_COLOR is unset or
empty (https://no-color.org) and TERM is not "dumb".
"""

import functools
import json
import os
import re
import sys

BOLD, DIM, HIGHLIGHT, RESET = "\x1b[1m", "\x1b[2m", "\x1b[1;33m", "\x1b[0m"
# Control characters other than newline and tab (which are always kept): text
# from an imported file must not move the cursor or recolour the user's terminal.
CONTROL = {c: None for c in (*range(0x00, 0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0))}
TITLE_WIDTH = 60


# A lone surrogate is no character: UTF-8 cannot write it. One in the archive (stored by an
# older chatdb) is written as U+FFFD, so that one bad string never stops an export or a listing.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def print_json(value) -> None:
    print_text(json.dumps(value, ensure_ascii=False, indent=2))


def print_text(text: str = "") -> None:
    sys.stdout.write(encodable(text)[0] + "\n")


def encodable(text: str) -> "tuple[str, int]":
    """`text` with each lone surrogate made U+FFFD, and how many there were."""
    if text.isascii():
        return text, 0
    return LONE_SURROGATE.subn(REPLACEMENT, text)


def error(message: str) -> None:
    """`chatdb: error: ...` on stderr, always one line."""
    sys.stderr.write(f"chatdb: error: {one_line(message)}\n")


def use_color(stream=None) -> bool:
    stream = stream or sys.stdout
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return hasattr(stream, "isatty") and stream.isatty()


def bold(text: str, color: bool) -> str:
    return f"{BOLD}{text}{RESET}" if color else text


def dim(text: str, color: bool) -> str:
    return f"{DIM}{text}{RESET}" if color else text


def safe(text: str, keep: str = "") -> str:
    """Text fit to print to a terminal: control characters dropped, but newline,
    tab and those in `keep` (e.g. search's match marks, replaced afterwards)."""
    return text.translate(_control_table(keep))


@functools.lru_cache(maxsize=8)
def _control_table(keep: str) -> dict:
    """Built once per `keep`: streaming calls safe() for every token."""
    return {c: v for c, v in CONTROL.items() if chr(c) not in keep} if keep else CONTROL


def one_line(text: str) -> str:
    return " ".join(safe(text).split())


def shorten(text: str, width: int) -> str:
    """`text` as one line of at most `width` characters (cut with "…")."""
    line = one_line(text)
    return line if len(line) <= width else line[: width - 1].rstrip() + "…"


def title_of(text: str) -> str:
    """A new conversation's title: the start of its first message."""
    return shorten(text, TITLE_WIDTH)


def minute(timestamp: str) -> str:
    """An ISO timestamp shown to the minute: 2024-05-01 12:00."""
    return timestamp[:16].replace("T", " ")


def warning(message: str) -> None:
    """`chatdb: warning: ...` on stderr, one line."""
    sys.stderr.write(f"chatdb: warning: {one_line(message)}\n")


def note(message: str) -> None:
    """`chatdb: ...` on stderr, one line: something worth knowing, not a fault."""
    sys.stderr.write(f"chatdb: {one_line(message)}\n")
