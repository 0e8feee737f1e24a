"""Fitting a conversation into the context: a window anchored at a message.

The system prompt stays; the window is the path from an anchor (a user
message) to the end. The anchor moves in steps of about half the room, at
fixed places along the path (the first user message past each multiple of
the step), and only when the messages after it no longer fit. So the window
stays the same for many turns: each turn only adds its new messages, its
state is a prefix of the next turn's (reused live, or restored from the
archive under the window's own key), and the choice depends on the path's
tokens alone, so another process or a recomputation picks the same window.

Per-message tokens are kept as they are, so the window is a PathTokens like
any path: a message's KV rows in a window sit at other positions than on
the whole path, and are stored under a key naming the anchor (`key`).
A template that is not prefix-stable has no per-message tokens: its window
is retokenized as one text, and its KV neither stored nor restored.
"""

from dataclasses import dataclass

from chatdb.records import Message

from .path_tokens import PathTokens

STEPS_PER_ROOM = 2   # the anchor moves by about half the room at a time


@dataclass
class Window:
    tokens: PathTokens
    left_out: int                   # messages after the system prompt left out
    anchor: "int | None" = None     # the message the window starts at, when any is left out

    def key(self, fingerprint: str) -> "str | None":
        """What the window's KV is stored under: the fingerprint and the anchor (None for
        the whole path, stored under the fingerprint itself)."""
        return None if self.anchor is None else f"{fingerprint}/window:{self.anchor}"


def fit_window(tokens: PathTokens, path: list[Message], budget: int, prompts) -> Window:
    lengths = tokens.lengths
    if sum(lengths) <= budget:
        return Window(tokens, 0)
    if not tokens.stable:
        return _retokenized(path, budget, prompts)
    head = 1 if path and path[0].role == "system" else 0
    room = budget - sum(lengths[:head])
    anchor = _anchor(path, lengths, head, room)
    kept = list(range(head)) + list(range(anchor, len(path)))
    window = PathTokens([tokens.message_ids[i] for i in kept], [tokens.arrays[i] for i in kept])
    return Window(window, anchor - head, path[anchor].id)


def _retokenized(path: list[Message], budget: int, prompts) -> Window:
    """A template that is not prefix-stable: the oldest turns left out one by one, the rest
    tokenized as one text (its KV belongs to no stored path: neither restored nor stored)."""
    head = path[:1] if path and path[0].role == "system" else []
    rest = path[len(head):]
    for drop in range(1, len(rest)):
        if rest[drop].role == "user" and sum((w := prompts.whole(head + rest[drop:])).lengths) <= budget:
            return Window(w, drop)
    return Window(prompts.whole(head + rest[-1:]), len(rest) - 1)


def _anchor(path: list[Message], lengths: list[int], head: int, room: int) -> int:
    """The index of the first message kept: the earliest step point whose rest fits."""
    step = max(1, room // STEPS_PER_ROOM)
    offsets, total = [], 0
    for n in lengths[head:]:
        offsets.append(total)
        total += n
    suffix = [total - offset for offset in offsets]   # tokens from each message to the end
    k, i = 1, head
    while True:
        while i < len(path) and (offsets[i - head] < k * step or path[i].role != "user"):
            i += 1
        if i >= len(path):
            return len(path) - 1   # nothing fits: the last message alone
        if suffix[i - head] <= room:
            return i
        k = offsets[i - head] // step + 1   # the next step point past this message
