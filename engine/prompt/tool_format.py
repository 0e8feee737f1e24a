"""Tools in a conversation as the model reads and writes them, and as the archive keeps them.

The format is the one Hermes-style tool-calling models are trained on (and
Qwen's template writes): the functions listed in the system message within
<tools></tools>, each call the model makes as

    <tool_call>
    {"name":"get_weather","arguments":{"city":"Paris"}}
    </tool_call>

and a tool's result read back within <tool_response></tool_response>. The
archive keeps exactly this text: an assistant message's content is what the
model wrote, calls included (so its stored tokens are the ones generated,
and search finds a call by its name or arguments), and a tool message holds
the result. A client that sends calls back (OpenAI's `tool_calls`) has them
rendered the same way (`call_text`), and the archive's message is found
again. A result is read by the template as a user turn (as_template_message).
"""

import json
import re
from dataclasses import dataclass

from ..llama.grammar import CALL_CLOSE, CALL_OPEN

TOOLS_INTRO = ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
               "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
TOOLS_OUTRO = ("</tools>\n\nFor each function call, return a json object with function name and "
               "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
               '{"name":<function-name>,"arguments":<args-json-object>}\n</tool_call>')
RESPONSE_OPEN, RESPONSE_CLOSE = "<tool_response>\n", "\n</tool_response>"
CALL = re.compile(re.escape(CALL_OPEN.strip()) + r"\s*(\{.*?\})\s*" + re.escape(CALL_CLOSE.strip()),
                  re.S)


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str        # JSON text, as written


def tools_text(system: str, functions: list[dict]) -> str:
    """The system message that lists `functions` (OpenAI's {type, function} entries)."""
    listed = "\n".join(json.dumps(f, ensure_ascii=False) for f in functions)
    tools = f"{TOOLS_INTRO}\n{listed}\n{TOOLS_OUTRO}"
    return f"{system}\n\n{tools}" if system else tools


def call_text(calls: list[ToolCall]) -> str:
    """How calls are written in an answer (the grammar of tool_call_grammar, exactly)."""
    return "\n".join(CALL_OPEN + '{"name":' + json.dumps(c.name) + ',"arguments":'
                     + canonical_arguments(c.arguments) + "}" + CALL_CLOSE for c in calls)


def canonical_arguments(arguments: str) -> str:
    """Arguments as the grammar writes them (compact JSON); text that is not JSON as it is."""
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False, separators=(",", ":"))
    except ValueError:
        return arguments


def split_calls(text: str) -> "tuple[str, list[ToolCall]]":
    """An answer's text before its first call, and its well-formed calls."""
    calls, first = [], None
    for match in CALL.finditer(text):
        try:
            call = json.loads(match[1])
        except ValueError:
            continue
        if isinstance(call, dict) and isinstance(call.get("name"), str):
            first = match.start() if first is None else first
            arguments = call.get("arguments", {})
            calls.append(ToolCall(call["name"], json.dumps(arguments, ensure_ascii=False,
                                                           separators=(",", ":"))))
    return (text if first is None else text[:first].rstrip()), calls


def as_template_message(role: str, content: str) -> dict:
    """A stored message as the chat template reads it: a tool result is a user turn in
    <tool_response> tags (as Qwen's template writes it; templates without a `tool`
    role, and those that refuse roles other than user and assistant, read it too)."""
    if role == "tool":
        return {"role": "user", "content": RESPONSE_OPEN + content + RESPONSE_CLOSE}
    return {"role": role, "content": content}
