"""Writing import records into the archive: all or nothing, and only once.

Everything happens in one transaction, so a file that fails half-way leaves
the archive as it was. A conversation or message whose uid is already in the
archive is a duplicate and is skipped (an existing conversation still gains
the messages it lacks); a second import of the same file adds nothing.
"""

from dataclasses import dataclass

from ..archive import Archive, meta_json
from .records import ConversationRecord, MessageRecord, fail, parents_first

# Row-level fix-ups the public API has no call for: they restore what the
# file says instead of what "now" would be.
SET_OWNER = "UPDATE messages SET conversation_id = ? WHERE id = ?"
RESTORE_CONVERSATION = "UPDATE conversations SET head_id = ?, meta = ?, updated_at = ? WHERE id = ?"


@dataclass
class ImportReport:
    format: str = ""
    conversations: int = 0             # created
    messages: int = 0                  # created
    duplicate_conversations: int = 0   # already in the archive
    duplicate_messages: int = 0
    skipped: int = 0                   # entries of the file that are not messages chatdb keeps


def write_records(archive: Archive, records: list[ConversationRecord], report: ImportReport
                  ) -> ImportReport:
    with archive.transaction():
        conv_ids, created = _create_conversations(archive, records, report)
        message_ids: dict[str, int] = {}
        for record in records:
            report.skipped += record.skipped
            for message in _parents_first(record):
                _add_message(archive, record, message, conv_ids, message_ids, report)
        for record in created:
            _restore(archive, record, conv_ids[record.uid], message_ids)
    return report


def _create_conversations(archive: Archive, records: list[ConversationRecord],
                          report: ImportReport):
    """Every conversation first: a message may name any of them as its writer."""
    conv_ids: dict[str, int] = {}
    created = []
    for record in records:
        existing = conv_ids.get(record.uid) or _existing_conversation(archive, record.uid)
        if existing is not None:
            conv_ids[record.uid] = existing
            report.duplicate_conversations += 1
            continue
        conv = archive.create_conversation(record.title, model=record.model, uid=record.uid,
                                           created_at=record.created_at,
                                           updated_at=record.updated_at)
        conv_ids[record.uid] = conv.id
        created.append(record)
        report.conversations += 1
    return conv_ids, created


def _parents_first(record: ConversationRecord) -> list[MessageRecord]:
    """The messages in file order, except that a child waits for its parent."""
    seen = set()
    for message in record.messages:
        if message.uid in seen:
            raise fail(message.where, "appears twice in the conversation")
        seen.add(message.uid)
    order, looped = parents_first(record.messages, lambda m: m.uid, lambda m: m.parent_uid)
    if looped is not None:
        raise fail(looped.where, "its parent links form a cycle")
    return order


def _add_message(archive: Archive, record: ConversationRecord, message: MessageRecord,
                 conv_ids: dict, message_ids: dict, report: ImportReport) -> None:
    if message.uid in message_ids:  # shared with a conversation imported just before
        return
    existing = archive.message_by_uid(message.uid)
    if existing is not None:
        message_ids[message.uid] = existing.id
        report.duplicate_messages += 1
        return
    parent_id = _message_id(archive, message.parent_uid, message_ids)
    if message.parent_uid is not None and parent_id is None:
        raise fail(message.where, f'parent "{message.parent_uid}" is neither in the file '
                                  "nor in the archive")
    conv_id = conv_ids[record.uid]
    owner = _owner(archive, message.owner_uid, conv_id, conv_ids)
    added = archive.add_message(owner or conv_id, message.role, message.content,
                                parent_id=parent_id, status=message.status, meta=message.meta,
                                created_at=message.created_at, uid=message.uid, move_head=False)
    if owner is None:
        archive.conn.execute(SET_OWNER, (None, added.id))
    message_ids[message.uid] = added.id
    report.messages += 1


def _owner(archive: Archive, owner_uid: "str | None", conv_id: int, conv_ids: dict) -> "int | None":
    """The writing conversation's id; an unknown writer becomes the importing conversation."""
    if owner_uid is None:
        return None
    if owner_uid in conv_ids:
        return conv_ids[owner_uid]
    return _existing_conversation(archive, owner_uid) or conv_id


def _restore(archive: Archive, record: ConversationRecord, conv_id: int, message_ids: dict) -> None:
    """Head, meta and update time as the file has them (the system prompt is the
    root system message, imported with the messages)."""
    head_id = _message_id(archive, record.head_uid, message_ids)
    if record.head_uid is not None and head_id is None:
        raise fail(record.where, f'head "{record.head_uid}" is not one of its messages')
    meta = dict(record.meta)
    source = meta.pop("forked_from", None)  # exported as a message uid; stored as its id
    source_id = _message_id(archive, source, message_ids) if isinstance(source, str) else None
    if source_id is not None:
        meta["forked_from"] = source_id
    archive.conn.execute(RESTORE_CONVERSATION, (head_id, meta_json(meta), record.updated_at,
                                                conv_id))


def _message_id(archive: Archive, uid: "str | None", message_ids: dict) -> "int | None":
    if uid is None:
        return None
    if uid in message_ids:
        return message_ids[uid]
    found = archive.message_by_uid(uid)
    return found.id if found else None


def _existing_conversation(archive: Archive, uid: str) -> "int | None":
    found = archive.conversation_by_uid(uid)
    return found.id if found else None
