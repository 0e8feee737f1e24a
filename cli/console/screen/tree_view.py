"""A conversation's tree as text: branches indented only where they split.

    * [1] you: What is a lifetime?
      ├─ assistant: They name regions of code.
      └─ * [2] assistant: A lifetime is the scope a borrow lives in.   ◀ head

A linear run of messages stays in one column, so a long chat with one
retry is a few lines wider, not a staircase. `*` marks the current path,
whose messages carry their /history numbers.
"""

from collections import defaultdict

from chatdb.records import Message

from .views import ROLE_NAMES, preview

WIDTH = 72


def children_map(messages: list[Message]) -> "dict[int | None, list[Message]]":
    kids: "dict[int | None, list[Message]]" = defaultdict(list)
    ids = {m.id for m in messages}
    for m in messages:  # by depth then id: older siblings first
        kids[m.parent_id if m.parent_id in ids else None].append(m)
    return kids


def branch_lines(messages: list[Message], path: list[Message], head_id: "int | None"
                 ) -> list[tuple[str, bool]]:
    """(line, on the current path) for each message of the tree."""
    kids = children_map(messages)
    numbers = {m.id: n for n, m in enumerate((m for m in path if m.role != "system"), 1)}
    on_path = {m.id for m in path}
    lines: list[tuple[str, bool]] = []

    def label(m: Message) -> str:
        number = f"[{numbers[m.id]}] " if m.id in numbers else ""
        head = "   ◀ head" if m.id == head_id else ""
        return f"{number}{ROLE_NAMES.get(m.role, m.role)}: {preview(m.content, WIDTH)}{head}"

    def walk(m: Message, first: str, rest: str) -> None:
        while True:  # iterative along single-child runs: deep chats do not recurse
            mark = "* " if m.id in on_path else "  "
            lines.append((f"{mark}{first}{label(m)}", m.id in on_path))
            below = kids.get(m.id, [])
            if len(below) != 1:
                break
            m, first = below[0], rest
        for i, child in enumerate(below):
            last = i == len(below) - 1
            walk(child, rest + ("└─ " if last else "├─ "), rest + ("   " if last else "│  "))

    roots = kids.get(None, [])
    for root in roots:
        walk(root, "", "")
    return lines


def branch_points(messages: list[Message], path: list[Message]) -> list[Message]:
    """Messages of the path, above its tip, where the tree splits (nearest last)."""
    kids = children_map(messages)
    return [m for m in path[:-1] if len(kids.get(m.id, [])) > 1]
