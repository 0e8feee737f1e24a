"""A conversation's current path as readable Markdown (for people, not re-import)."""

from ..archive import Archive
from ..records import Conversation, Message

RULE = "\n---\n\n"  # between conversations


def markdown_document(archive: Archive, conv_ids: list[int]) -> str:
    return RULE.join(conversation_markdown(archive.conversation(cid), archive.messages(cid))
                     for cid in dict.fromkeys(conv_ids))


def conversation_markdown(conv: Conversation, messages: list[Message]) -> str:
    about = [f"conversation {conv.id}", f"created {_when(conv.created_at)}",
             f"updated {_when(conv.updated_at)}"]
    if conv.model:
        about.append(f"model {conv.model}")
    parts = [f"# {_one_line(conv.title) or 'Untitled'}\n", f"*{' · '.join(about)}*\n"]
    parts += [_message(m) for m in messages]
    return "\n".join(parts)


def _message(message: Message) -> str:
    heading = f"## {message.role.capitalize()}"
    if message.status != "complete":
        heading += f" ({message.status})"
    return f"{heading}\n\n{message.content.rstrip()}\n"


def _when(timestamp: str) -> str:
    return timestamp[:16].replace("T", " ") + " UTC"


def _one_line(text: str) -> str:
    return " ".join(text.split())
