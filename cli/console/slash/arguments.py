"""What command arguments name: conversations (N, #ID, uid, title) and message numbers.

N is a conversation's number in the last /list (most recent first; without
a /list, the current order), #ID its id as `chatdb list` shows it, and any
other text a title: exact (any case) first, else the one title containing it.
"""

from chatdb.errors import ChatdbError
from chatdb.records import Message

from ...options import MAX_INTEGER

TITLE_CANDIDATES_SHOWN = 5


class UsageError(ChatdbError):
    """A command's arguments are wrong; the dispatcher adds the command's usage."""


def whole_number(text: str, what: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_INTEGER:
        raise UsageError(f"{what} must be a whole number from 1 to {MAX_INTEGER}, not {text!r}")
    return int(text)


def conversation_id(session, ref: str) -> int:
    ref = ref.strip()
    if not ref:
        raise UsageError("name a conversation: N from /list, #ID, or a title")
    if ref.startswith("#"):
        return session.archive.conversation(whole_number(ref[1:], "#ID")).id
    if ref.isascii() and ref.isdigit():
        return _listed(session, whole_number(ref, "N"))
    by_uid = session.archive.conversation_by_uid(ref) if len(ref) == 32 else None
    return by_uid.id if by_uid else _by_title(session, ref)


def _listed(session, n: int) -> int:
    ids = session.listed or [c.id for c in session.archive.list_conversations(limit=n)]
    if n > len(ids):
        shown = "the last /list showed" if session.listed else "there are"
        raise UsageError(f"{shown} {len(ids)} conversation{'s' if len(ids) != 1 else ''}; "
                         f"no number {n} (#ID names a conversation by id)")
    return ids[n - 1]


def _by_title(session, text: str) -> int:
    rows = session.archive.list_conversations(archived=None)   # archived ones too
    exact = [r for r in rows if r.title.casefold() == text.casefold()]
    found = exact or [r for r in rows if text.casefold() in r.title.casefold()]
    if len(found) == 1:
        return found[0].id
    if not found:
        raise UsageError(f"no conversation titled {text!r} (/list shows them)")
    names = ", ".join(f"#{r.id} {r.title!r}" for r in found[:TITLE_CANDIDATES_SHOWN])
    more = f" and {len(found) - TITLE_CANDIDATES_SHOWN} more" if len(found) > TITLE_CANDIDATES_SHOWN else ""
    raise UsageError(f"{len(found)} conversations match {text!r}: {names}{more}; give #ID")


def message_number(session, text: str, *, default_last: bool = True) -> "tuple[int, Message]":
    """(N, message) for message N of the current path, as /history numbers them."""
    numbered = session.numbered()
    if not numbered:
        raise UsageError("this conversation has no messages yet")
    if not text.strip():
        if not default_last:
            raise UsageError("give a message number (/history shows them)")
        return len(numbered), numbered[-1]
    n = whole_number(text.strip(), "the message number")
    if n > len(numbered):
        raise UsageError(f"the current path has {len(numbered)} messages; no message {n}")
    return n, numbered[n - 1]
