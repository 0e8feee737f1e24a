"""Reading the conversations.json of a ChatGPT data export into import records.

Each conversation there is a tree: `mapping` holds nodes {id, message,
parent, children} and `current_node` is the tip last shown. Every branch is
kept: an edited question or a regenerated answer is a sibling, as in chatdb.
Nodes that are not visible text from system, user or assistant -- the empty
root, hidden system messages, tool calls and tool output, images alone --
are left out, and their children hang from the nearest ancestor kept.
Parent links are the truth; `children` lists are not read.

Uids: "chatgpt:<conversation id>" and "chatgpt:<conversation id>:<node id>",
so a second import of the same file finds everything already there.
"""

from ..clock import from_unix, now
from .records import ConversationRecord, MessageRecord, conversation_label, fail, get, parents_first

UID_PREFIX = "chatgpt:"
TEXT_TYPES = ("text", "multimodal_text")
INTERRUPTED = ("in_progress", "finished_partial_completion")


# ChatGPT's own tool messages (browsing, code runs) are not imported: only the chat.
CHAT_ROLES = ("system", "user", "assistant")

def is_chatgpt_export(document) -> bool:
    """conversations.json is a list; a single conversation object is accepted too."""
    return isinstance(document, list) or (isinstance(document, dict) and "mapping" in document)


def read_chatgpt_conversation(number: int, raw) -> ConversationRecord:
    """The number-th conversation (from 1) of the file."""
    if not isinstance(raw, dict):
        raise fail(conversation_label(number, None), "is not an object")
    where = conversation_label(number, raw.get("title"))
    conv_id = (get(raw, "id", str, where, required=False)
               or get(raw, "conversation_id", str, where, required=False))
    if not conv_id:
        raise fail(where, 'missing "id"')
    nodes = _nodes(get(raw, "mapping", dict, where), where)
    created = _time(raw, "create_time", where)
    messages, anchor, skipped = _messages(nodes, f"{UID_PREFIX}{conv_id}", created, where)
    created = created or min((m.created_at for m in messages), default=None) or now()
    return ConversationRecord(
        uid=f"{UID_PREFIX}{conv_id}",
        title=get(raw, "title", str, where, required=False) or "",
        created_at=created,
        updated_at=_time(raw, "update_time", where) or created,
        head_uid=_head(raw, messages, anchor, where),
        messages=messages,
        model=get(raw, "default_model_slug", str, where, required=False),
        meta={"imported_from": "chatgpt"},
        archived=get(raw, "is_archived", bool, where, required=False) or False,
        where=where,
        skipped=skipped,
    )


def _nodes(mapping: dict, where: str) -> dict[str, "tuple[str | None, dict | None]"]:
    """node id -> (parent id, message), every parent checked to be in the mapping."""
    nodes = {}
    for key, node in mapping.items():
        node_where = f'{where}: node "{key}"'
        if not isinstance(node, dict):
            raise fail(node_where, "is not an object")
        nodes[key] = (get(node, "parent", str, node_where, required=False),
                      get(node, "message", dict, node_where, required=False))
    for key, (parent, _) in nodes.items():
        if parent is not None and parent not in nodes:
            raise fail(f'{where}: node "{key}"', f'parent "{parent}" is not in "mapping"')
    return nodes


def _parents_first(nodes: dict, where: str) -> list[str]:
    order, looped = parents_first(list(nodes), lambda key: key, lambda key: nodes[key][0])
    if looped is not None:
        raise fail(f'{where}: node "{looped}"', "its parent links form a cycle")
    return order


def _messages(nodes: dict, conv_uid: str, created: "str | None", where: str):
    """The kept messages (oldest first), each node's nearest kept ancestor, and the skip count."""
    anchor: dict[str, "str | None"] = {}  # node id -> uid of the nearest kept node at or above
    times: dict[str, "str | None"] = {}
    messages, skipped = [], 0
    for key in _parents_first(nodes, where):
        parent, raw = nodes[key]
        above = anchor[parent] if parent is not None else None
        inherited = times[parent] if parent is not None else created
        record = _message(key, raw, conv_uid, above, inherited, f'{where}: node "{key}"')
        if raw is not None and record is None:
            skipped += 1
        anchor[key] = record.uid if record else above
        times[key] = record.created_at if record else inherited
        if record:
            messages.append(record)
    order = {m.uid: i for i, m in enumerate(messages)}
    # Oldest first numbers them by time; the writer still puts parents first.
    messages.sort(key=lambda m: (m.created_at, order[m.uid]))
    return messages, anchor, skipped


def _message(key: str, raw: "dict | None", conv_uid: str, parent_uid: "str | None",
             inherited: "str | None", where: str) -> "MessageRecord | None":
    if raw is None:
        return None
    role = get(get(raw, "author", dict, where), "role", str, where)
    content = get(raw, "content", dict, where)
    content_type = get(content, "content_type", str, where)
    metadata = get(raw, "metadata", dict, where, required=False) or {}
    if (role not in CHAT_ROLES or content_type not in TEXT_TYPES
            or metadata.get("is_visually_hidden_from_conversation")
            or raw.get("recipient") not in (None, "all")):  # a call addressed to a tool
        return None
    parts = get(content, "parts", list, where, required=False) or []
    text = "\n".join(p for p in parts if isinstance(p, str))
    if not text.strip():
        return None
    meta = {"imported_from": "chatgpt"}
    if isinstance(metadata.get("model_slug"), str):
        meta["model"] = metadata["model_slug"]
    if any(not isinstance(p, str) for p in parts):
        meta["omitted_parts"] = sum(not isinstance(p, str) for p in parts)
    return MessageRecord(
        uid=f"{conv_uid}:{key}",
        parent_uid=parent_uid,
        role=role,
        content=text,
        created_at=_time(raw, "create_time", where) or inherited or now(),
        status="interrupted" if raw.get("status") in INTERRUPTED else "complete",
        meta=meta,
        owner_uid=conv_uid,
        where=where,
    )


def _head(raw: dict, messages: list[MessageRecord], anchor: dict, where: str) -> "str | None":
    current = get(raw, "current_node", str, where, required=False)
    if current is None:  # none recorded: the newest message
        return messages[-1].uid if messages else None
    if current not in anchor:
        raise fail(where, f'"current_node" "{current}" is not in "mapping"')
    return anchor[current]


def _time(obj: dict, key: str, where: str) -> "str | None":
    """A unix time in seconds as ISO text; None when absent."""
    seconds = get(obj, key, (int, float), where, required=False)
    if seconds is None:
        return None
    try:
        return from_unix(seconds)
    except (OverflowError, OSError, ValueError):
        raise fail(where, f'"{key}" is not a usable time: {seconds!r}') from None
