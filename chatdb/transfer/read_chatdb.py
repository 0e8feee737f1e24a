"""Reading chatdb's own export (export_json) back into import records, an entry at a time."""

from ..records import ROLES, STATUSES
from ..tags import TagError, tag_name
from .export_json import FORMAT, VERSION
from .records import ConversationRecord, MessageRecord, conversation_label, fail, get, timestamp


def is_chatdb_export(document) -> bool:
    return isinstance(document, dict) and document.get("format") == FORMAT


def check_version(header: dict) -> None:
    """The export's version, from its top-level fields, is one this chatdb reads."""
    version = get(header, "version", int, "")
    if version > VERSION:
        raise fail("", f"chatdb export version {version} comes from a newer chatdb "
                       f"(this one reads up to {VERSION}); upgrade chatdb")
    if version < 1:
        raise fail("", f"unknown chatdb export version {version}")


def read_chatdb_conversation(number: int, raw) -> ConversationRecord:
    """The number-th entry (from 1) of the export's "conversations"."""
    if not isinstance(raw, dict):
        raise fail(conversation_label(number, None), "is not an object")
    where = conversation_label(number, raw.get("title"))
    uid = get(raw, "uid", str, where)
    messages = get(raw, "messages", list, where)
    return ConversationRecord(
        uid=uid,
        title=get(raw, "title", str, where, required=False) or "",
        created_at=timestamp(raw, "created_at", where),
        updated_at=timestamp(raw, "updated_at", where),
        head_uid=get(raw, "head", str, where, required=False),
        messages=[_message(index, m, uid, where) for index, m in enumerate(messages, 1)],
        # "system_prompt" is not read: it repeats the root system message, which is imported.
        model=get(raw, "model", str, where, required=False),
        meta=get(raw, "meta", dict, where, required=False) or {},
        tags=_tags(raw, where),
        pinned=get(raw, "pinned", bool, where, required=False) or False,
        archived=get(raw, "archived", bool, where, required=False) or False,
        owner=get(raw, "owner", str, where, required=False),
        where=where,
    )


def _tags(raw: dict, where: str) -> list[str]:
    """The conversation's tags (absent in exports made before chatdb had them)."""
    tags = get(raw, "tags", list, where, required=False) or []
    for tag in tags:
        try:
            tag_name(tag)
        except TagError as exc:
            raise fail(where, f'"tags": {exc}') from None
    return tags


def _message(index: int, raw, conv_uid: str, conv_where: str) -> MessageRecord:
    where = f"{conv_where}: message {index}"
    if not isinstance(raw, dict):
        raise fail(where, "is not an object")
    uid = get(raw, "uid", str, where)
    where = f'{conv_where}: message "{uid}"'
    role = get(raw, "role", str, where)
    if role not in ROLES:
        raise fail(where, f'"role" is {role!r}, expected one of {", ".join(ROLES)}')
    status = get(raw, "status", str, where, required=False) or "complete"
    if status not in STATUSES:
        raise fail(where, f'"status" is {status!r}, expected one of {", ".join(STATUSES)}')
    return MessageRecord(
        uid=uid,
        parent_uid=get(raw, "parent", str, where, required=False),
        role=role,
        content=get(raw, "content", str, where),
        created_at=timestamp(raw, "created_at", where),
        status=status,
        meta=get(raw, "meta", dict, where, required=False) or {},
        # Absent: written by this conversation; null: by none that still exists.
        owner_uid=get(raw, "conversation", str, where, required=False)
        if "conversation" in raw else conv_uid,
        where=where,
    )
