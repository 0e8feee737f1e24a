"""Placing a client's message list in the tree: reuse the longest stored path, add the rest.

OpenAI-style clients resend the whole conversation with every request. The
longest stored path whose roles and contents equal the request's, in order,
is found with one indexed query over content hashes; only the messages
after it are added, so a resend adds its new messages and a request that
differs at message k branches there, as an edit does in the console.

On a server several people share, only the requesting user's own messages
(those its conversations wrote) are matched: another user's identical chat is
neither continued nor resumed, and its KV, stored under its own messages,
is never restored for this one. With `share_prefix` (serve --share-prefix) a
root system prompt anyone stored may be matched, so that its KV is shared.
"""

import json
from dataclasses import dataclass

from .content_hash import content_hash
from .records import Message

# The chains of stored messages equal (by hash) to the request's first
# messages, from a root down; the deepest wins, the newest among equals.
LONGEST_MATCH = """
WITH RECURSIVE wanted(i, h) AS (
    SELECT CAST(key AS INTEGER), value FROM json_each(:hashes)
),
chain(id, i) AS (
    SELECT m.id, 0 FROM messages m LEFT JOIN conversations c ON c.id = m.conversation_id
    WHERE m.content_hash = (SELECT h FROM wanted WHERE i = 0) AND m.parent_id IS NULL
      AND (c.owner IS :owner OR (:share AND m.role = 'system'))
    UNION ALL
    SELECT m.id, chain.i + 1 FROM chain
    JOIN wanted w ON w.i = chain.i + 1
    JOIN messages m ON m.content_hash = w.h AND m.parent_id = chain.id
    LEFT JOIN conversations c ON c.id = m.conversation_id
    WHERE c.owner IS :owner
)
SELECT id FROM chain ORDER BY i DESC, id DESC LIMIT 1"""

# A conversation whose head is this message: the request continues it.
CONTINUED_BY = """
SELECT id FROM conversations WHERE head_id = ? AND owner IS ?
ORDER BY updated_at DESC, id DESC LIMIT 1"""


@dataclass
class Placement:
    conversation_id: int
    path: list[Message]       # root to the request's last message
    reused: int               # messages of the request already stored
    created: bool             # a new conversation was started


def longest_match(archive, messages: list[tuple[str, str]], owner: "str | None" = None,
                  share_prefix: bool = False) -> list[Message]:
    """The stored path (root first) of `owner`'s messages equal to the longest prefix of
    `messages`; its root may be anyone's system prompt with `share_prefix`."""
    if not messages:
        return []
    hashes = json.dumps([content_hash(role, content) for role, content in messages])
    row = archive.conn.execute(LONGEST_MATCH, {"hashes": hashes, "owner": owner,
                                               "share": share_prefix}).fetchone()
    if row is None:
        return []
    path = archive.path(row[0])
    for i, message in enumerate(path):  # a hash collision must not join two texts
        if (message.role, message.content) != messages[i]:
            return path[:i]
    return path


def place(archive, messages: list[tuple[str, str]], title: str, meta: dict,
          tags=(), owner: "str | None" = None, share_prefix: bool = False) -> Placement:
    """Store what the archive lacks of `messages`; one transaction.

    The new messages go to the conversation whose head the match ends at;
    else to the conversation that wrote the last matched message, as a new
    branch (its head moves there, as after an edit); a match holding no
    user message (a shared system prompt) starts a new conversation. Each is `owner`'s.
    """
    with archive.transaction():
        path = longest_match(archive, messages, owner, share_prefix)
        conv_id, created = _conversation_for(archive, path, title, meta, owner)
        reused = len(path)
        parent = path[-1].id if path else None
        for role, content in messages[reused:]:
            message = archive.add_message(conv_id, role, content, parent_id=parent)
            path.append(message)
            parent = message.id
        if reused == len(messages):
            archive.set_head(conv_id, parent)  # a resend answered again: a sibling answer
        if tags:
            archive.tags.add(conv_id, tags)
    return Placement(conv_id, path, reused, created)


def unplace(archive, placement: Placement) -> None:
    """Take back what place() added, for a request refused before it was answered (too long
    for the context, a template's refusal): as `ask` does, no question is kept that nobody
    will answer, and a retry adds no second one. What another turn has meanwhile hung under
    a message keeps it, and all above it."""
    with archive.transaction():
        for message in reversed(placement.path[placement.reused:]):
            if not archive.retract(message.id):
                return
        if placement.created:
            archive.delete_conversation(placement.conversation_id)


def _conversation_for(archive, path: list[Message], title: str, meta: dict,
                      owner: "str | None") -> "tuple[int, bool]":
    if path and any(m.role == "user" for m in path):
        row = archive.conn.execute(CONTINUED_BY, (path[-1].id, owner)).fetchone()
        if row is not None:
            return row[0], False
        holder = path[-1].conversation_id   # the conversation the path's last message is in
        if holder is not None:
            return holder, False
    # Its system prompt is its path's root (a shared one is not copied).
    conv = archive.create_conversation(title, head_id=path[-1].id if path else None, meta=meta,
                                       owner=owner)
    return conv.id, True
