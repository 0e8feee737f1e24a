"""Tool calls out of a streamed answer, as OpenAI streams them.

Text before a call streams as content; a call streams as a `tool_calls`
delta with its index, id, type and name, then its arguments in fragments as
the model writes them. Calls are written in a fixed form (the grammar of
engine.llama.grammar.tool_call_grammar: compact JSON, or spaced as the
model's template spaces it), so the stream is cut by plain text matching;
what is held back at any moment is at most the length of a marker.
"""

import re
import uuid

from engine.llama.grammar import CALL_CLOSE, CALL_OPEN, CALL_TAIL

OPEN = CALL_OPEN.strip()
HEAD = re.compile(re.escape(OPEN) + r'\s*\{"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"arguments"\s*:\s*(?=\S)', re.S)


class ToolStream:
    """feed(text) -> deltas: {"content": str} or {"tool_calls": [...]}. Content is the
    text before the first call (whitespace before a call dropped), as split_calls has it."""

    def __init__(self):
        self.state, self.buffer, self.calls = "text", "", 0
        self.ids: list[str] = []

    def feed(self, text: str) -> list[dict]:
        self.buffer += text
        out = []
        while True:
            step = getattr(self, "_" + self.state)()
            if step is None:
                return out
            out.extend(step)

    def close(self) -> list[dict]:
        """What is held back at the end (an unfinished call's arguments as they are)."""
        rest, self.buffer = self.buffer, ""
        if self.state == "args":
            return [self._arguments(rest)] if rest else []
        return [{"content": rest}] if rest and not self.calls else []

    def _text(self):
        at = self.buffer.find(OPEN)
        if at >= 0:
            before, self.buffer = self.buffer[:at], self.buffer[at:]
            self.state = "head"
            body = "" if self.calls else before.rstrip()
            return [{"content": body}] if body else []
        text = self.buffer[:len(self.buffer) - _partial_suffix(self.buffer, OPEN)]
        if self.calls:          # after a call only the newlines between calls come
            self.buffer = self.buffer[len(text):]
            return None
        body = text.rstrip()    # whitespace waits: it is dropped if a call follows
        if not body:
            return None
        self.buffer = self.buffer[len(body):]
        return [{"content": body}]

    def _head(self):
        match = HEAD.match(self.buffer)
        if match is None:
            return None
        self.buffer = self.buffer[match.end():]
        self.state = "args"
        index = self.calls
        self.calls += 1
        self.ids.append(new_call_id())
        return [{"tool_calls": [{"index": index, "id": self.ids[index], "type": "function",
                                 "function": {"name": match[1], "arguments": ""}}]}]

    def _args(self):
        end = self.buffer.find(CALL_CLOSE.strip())
        if end >= 0:
            arguments = self.buffer[:end].rstrip()
            arguments = arguments[:-1] if arguments.endswith("}") else arguments
            self.buffer = self.buffer[end + len(CALL_CLOSE.strip()):]
            self.state = "text"
            return [self._arguments(arguments)] if arguments else []
        safe = len(self.buffer) - len(CALL_TAIL)
        if safe <= 0:
            return None
        part, self.buffer = self.buffer[:safe], self.buffer[safe:]
        return [self._arguments(part)]

    def _arguments(self, part: str) -> dict:
        return {"tool_calls": [{"index": self.calls - 1, "function": {"arguments": part}}]}


def new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


def _partial_suffix(text: str, marker: str) -> int:
    """The length of the longest end of `text` that begins `marker`."""
    for n in range(min(len(text), len(marker) - 1), 0, -1):
        if marker.startswith(text[-n:]):
            return n
    return 0
