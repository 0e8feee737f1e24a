"""What a CONV or MESSAGE argument names: a numeric id, or a uid (as in exports)."""

from chatdb.archive import Archive
from chatdb.errors import NotFound
from chatdb.records import Conversation, Message

from .options import MAX_INTEGER  # a larger number can only be a uid


def conversation(archive: Archive, ref: str) -> Conversation:
    ref = ref.strip()
    row_id = _row_id(ref)
    found = archive.conversation(row_id) if row_id is not None else archive.conversation_by_uid(ref)
    if found is None:
        raise NotFound(f"no conversation {ref!r} (give its number from `chatdb list`, or its uid)")
    return found


def message(archive: Archive, ref: str) -> Message:
    ref = ref.strip()
    row_id = _row_id(ref)
    found = archive.message(row_id) if row_id is not None else archive.message_by_uid(ref)
    if found is None:
        raise NotFound(f"no message {ref!r} (give its number from `chatdb show`, or its uid)")
    return found


def _row_id(ref: str) -> "int | None":
    if ref.isascii() and ref.isdigit() and int(ref) <= MAX_INTEGER:
        return int(ref)
    return None
