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
from .template import TemplateUnstable

STEPS_PER_ROOM = 2   # the anchor moves by about half the room at a time


@dataclass
class Window:
    tokens: PathTokens
    left_out: int                   # messages after the system prompt left out
    anchor: "int | None" = None     # the message the window starts at, when any is left out

    def first_kept(self, path: list[Message]) -> "int | None":
        """The id of the first message after the system prompt that the window of `path`
        holds (None: the path is the system prompt alone)."""
        after_system = path[1:] if path and path[0].role == "system" else path
        return after_system[self.left_out].id if self.left_out < len(after_system) else None

    def key(self, fingerprint: str) -> "str | None":
        """What the window's KV is stored under: the fingerprint and the anchor (None for
        the whole path, stored under the fingerprint itself)."""
        return None if self.anchor is None else f"{fingerprint}/window:{self.anchor}"


def fit_path(prompts, path: list[Message], budget: int) -> Window:
    """The window of `path` for `budget` tokens, reading no more of the path than it keeps
    (and the messages before it that show it must stop there).

    Its step points are placed by an estimate of each message's tokens from its text
    (ESTIMATE_BYTES per token, plus the template's few), not by its tokens, so that
    finding them needs no tokenizer: the estimate depends on the text alone, so the
    window is as stable and as much the same in every process as before. Whether a
    window fits is decided on the real tokens, computed from the end back.
    """
    lazy = prompts.lazy(path)
    try:
        window = _fit_lazily(lazy, path, budget)
    except TemplateUnstable:
        return _retokenized(path, budget, prompts)
    finally:
        lazy.store()
    return window


ESTIMATE_BYTES = 3      # of UTF-8 text per token: about right for CJK, generous for English
ESTIMATE_MARKERS = 4    # tokens a template adds around a message


def _estimate(message: Message) -> int:
    return len(message.content.encode("utf-8", "surrogatepass")) // ESTIMATE_BYTES + ESTIMATE_MARKERS


def _fit_lazily(lazy, path: list[Message], budget: int) -> Window:
    total, i = 0, len(path)
    while i > 0 and total <= budget:
        i -= 1
        total += lazy.length(i)
    if total <= budget:
        return Window(lazy.tokens(range(len(path))), 0)
    head = 1 if path and path[0].role == "system" else 0
    room = budget - sum(lazy.length(j) for j in range(head))
    sizes = [_estimate(m) for m in path]
    anchor = _anchor(path, sizes, head, room, lambda start: _suffix_fits(lazy, start, room))
    kept = list(range(head)) + list(range(anchor, len(path)))
    return Window(lazy.tokens(kept), anchor - head, path[anchor].id)


def _suffix_fits(lazy, start: int, room: int) -> bool:
    total = 0
    for j in range(len(lazy.path) - 1, start - 1, -1):
        total += lazy.length(j)
        if total > room:
            return False
    return True


def fit_window(tokens: PathTokens, path: list[Message], budget: int, prompts) -> Window:
    lengths = tokens.lengths
    if sum(lengths) <= budget:
        return Window(tokens, 0)
    if not tokens.stable:
        return _retokenized(path, budget, prompts)
    head = 1 if path and path[0].role == "system" else 0
    room = budget - sum(lengths[:head])
    suffix = _suffixes(lengths)
    anchor = _anchor(path, lengths, head, room, lambda start: suffix[start] <= room)
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


def _anchor(path: list[Message], sizes: list[int], head: int, room: int, fits) -> int:
    """The index of the first message kept: the earliest step point whose rest fits.

    Step points are the first user message past each multiple of half the room,
    counted in `sizes` from the start (tokens, or an estimate of them);
    `fits(i)` says whether messages i.. fit. Tried from the last step point back,
    and only until one does not fit (the rest from an earlier one is longer).
    """
    step = max(1, room // STEPS_PER_ROOM)
    points, offset, k = [], 0, 1
    for i in range(head, len(path)):
        if offset >= k * step and path[i].role == "user":
            points.append(i)
            k = offset // step + 1   # the next step point past this message
        offset += sizes[i]
    chosen = None
    for i in reversed(points):
        if not fits(i):
            break
        chosen = i
    return chosen if chosen is not None else len(path) - 1   # nothing fits: the last alone


def _suffixes(lengths: list[int]) -> list[int]:
    """Tokens from each message to the end."""
    out, total = [0] * len(lengths), 0
    for i in range(len(lengths) - 1, -1, -1):
        total += lengths[i]
        out[i] = total
    return out
