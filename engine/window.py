"""Fitting a conversation into the context: leave out the oldest turns.

The system prompt stays; whole turns after it are left out, oldest first,
until the rest fits. The window is then tokenized as one text: its KV
belongs to no stored path, so it is neither restored nor stored.
"""

from dataclasses import dataclass

from chatdb.records import Message

from .prompt import PathTokens, PromptBuilder


@dataclass
class Window:
    tokens: PathTokens
    left_out: int


def fit_window(tokens: PathTokens, path: list[Message], budget: int,
               prompts: PromptBuilder) -> Window:
    if sum(tokens.lengths) <= budget:
        return Window(tokens, 0)
    head = path[:1] if path and path[0].role == "system" else []
    rest = path[len(head):]
    for drop in range(1, len(rest)):
        kept = rest[drop:]
        if kept[0].role != "user":
            continue
        window = prompts.whole(head + kept)
        if sum(window.lengths) <= budget:
            return Window(window, drop)
    window = prompts.whole(head + rest[-1:])
    return Window(window, len(rest) - 1)
