"""What every import format is read into before anything is written.

A reader (read_chatdb, read_chatgpt) turns each conversation of a file into
a ConversationRecord, checking shapes as it goes and failing with an
ImportFormatError that says where; only then does the writer touch the
archive with it. Messages and conversations are identified by uid, so
importing the same file twice finds everything already there.
"""

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from ..errors import ChatdbError


class ImportFormatError(ChatdbError):
    """A file that cannot be imported: the message says what and where."""


@dataclass
class MessageRecord:
    uid: str
    parent_uid: "str | None"
    role: str
    content: str
    created_at: str
    status: str = "complete"
    meta: dict = field(default_factory=dict)
    # The conversation that wrote the message (forks share their ancestors'
    # messages); None when no conversation owns it any more.
    owner_uid: "str | None" = None
    where: str = ""  # e.g. 'conversation 3 ("Trip"): message "3f2a"', for errors


@dataclass
class ConversationRecord:
    uid: str
    title: str
    created_at: str
    updated_at: str
    head_uid: "str | None"
    messages: list[MessageRecord]
    model: "str | None" = None
    meta: dict = field(default_factory=dict)
    tags: list = field(default_factory=list)   # as written (chatdb.tags checks them)
    pinned: bool = False
    archived: bool = False
    owner: "str | None" = None   # the shared server's user who created it
    where: str = ""  # e.g. 'conversation 3 ("Trip")'
    skipped: int = 0  # entries of the file the reader left out (not text, tool calls)


def conversation_label(number: int, title) -> str:
    """How errors name the number-th conversation of a file (counting from 1)."""
    if isinstance(title, str) and title:
        shown = title if len(title) <= 40 else title[:39] + "…"
        return f'conversation {number} ("{shown}")'
    return f"conversation {number}"


def parents_first(items: list, key, parent) -> tuple[list, "object | None"]:
    """`items` in their order, except that one waits for its parent.

    `key(item)` names an item, `parent(item)` names its parent; a parent not
    among the items counts as placed. Returns (order, looped): looped is None,
    or an item whose parent links go round in a circle (nothing is placed then).
    """
    by_key = {key(item): item for item in items}
    order, placed, waiting = [], set(), defaultdict(list)
    for item in items:
        above = parent(item)
        if above in by_key and above not in placed:
            waiting[above].append(item)
            continue
        stack = [item]
        while stack:  # place it, then whatever was waiting for it
            current = stack.pop()
            order.append(current)
            placed.add(key(current))
            stack.extend(reversed(waiting.pop(key(current), [])))
    if not waiting:
        return order, None
    # Everything left waits on something left: going up from any of it ends in the circle.
    current, seen = next(iter(waiting.values()))[0], set()
    while key(current) not in seen:
        seen.add(key(current))
        current = by_key[parent(current)]
    return order, current


def fail(where: str, problem: str) -> "ImportFormatError":
    return ImportFormatError(f"{where}: {problem}" if where else problem)


def get(obj: dict, key: str, kinds: "type | tuple", where: str, *, required: bool = True):
    """obj[key] checked against `kinds`; a missing or null value is None unless required."""
    value = obj.get(key)
    if value is None:
        if required:
            raise fail(where, f'missing "{key}"')
        return None
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in _as_tuple(kinds)):
        raise fail(where, f'"{key}" is {_describe(value)}, expected {_kind_names(kinds)}')
    return value


def check_text(record: ConversationRecord) -> None:
    """Every string SQLite will store is UTF-8-encodable: JSON's "\\ud800" escape
    reads as a lone surrogate, which no text column can hold (and no export could
    write). Every field is checked, meta's keys and values too."""
    if _encodable(record):
        return
    _check_fields(record, record.where)   # to say which, and where
    for message in record.messages:
        _check_fields(message, message.where)


def _encodable(record: ConversationRecord) -> bool:
    """The quick look: all of the record's text encoded at once."""
    texts: list[str] = []
    for item in (record, *record.messages):
        for value in vars(item).values():
            if isinstance(value, str):
                texts.append(value)
            elif value and isinstance(value, dict):
                _strings(value, texts)
    try:
        "".join(texts).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _strings(value, texts: list[str]) -> None:
    """Every string in a value from JSON (keys too), added to `texts`."""
    if isinstance(value, str):
        texts.append(value)
    elif isinstance(value, dict):
        texts.extend(value)   # the keys
        for item in value.values():
            _strings(item, texts)
    elif isinstance(value, list):
        for item in value:
            _strings(item, texts)


def _check_fields(record, where: str) -> None:
    for name, value in vars(record).items():
        if name not in ("messages", "where"):
            _check_value(value, _json_name(name), where)


def _check_value(value, name: str, where: str) -> None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise fail(where, f'"{name}" holds a lone surrogate '
                              f'\\u{ord(value[exc.start]):04x} at character {exc.start + 1}, '
                              "which is not text") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_value(key, name, where)
            _check_value(item, f"{name}.{key}", where)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _check_value(item, name, where)


def _json_name(field_name: str) -> str:
    return {"head_uid": "head", "parent_uid": "parent", "owner_uid": "conversation"}.get(
        field_name, field_name)


def timestamp(obj: dict, key: str, where: str) -> str:
    """An ISO 8601 timestamp, kept as written so a round trip changes nothing."""
    value = get(obj, key, str, where)
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise fail(where, f'"{key}" is not an ISO 8601 time: {value!r}') from None
    return value


def _as_tuple(kinds) -> tuple:
    return kinds if isinstance(kinds, tuple) else (kinds,)


NAMES = {str: "a string", int: "an integer", float: "a number", dict: "an object",
         list: "a list", bool: "true or false"}


def _kind_names(kinds) -> str:
    kinds = _as_tuple(kinds)
    if float in kinds:  # (int, float) reads as "a number"
        kinds = tuple(k for k in kinds if k is not int)
    return " or ".join(NAMES.get(k, k.__name__) for k in kinds)


def _describe(value) -> str:
    if isinstance(value, bool):
        return "true or false"
    return NAMES.get(type(value), type(value).__name__)
