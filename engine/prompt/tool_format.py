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
again.

The archive's form is the same for every model; how the template reads it is
not. A template without tool support reads it as it is, a result as a user
turn in <tool_response> tags (`as_template_message`). A template with its own
Hermes-style tool support (tool_support.py says which) is given what it was
written for (`as_native_message`): the functions as its `tools` variable, an
assistant's calls as structured `tool_calls`, a result as a `tool` message;
its calls are then written with its own JSON spacing (`CallSyntax`).
"""

import json
import re
from dataclasses import dataclass

from ..llama.grammar import CALL_CLOSE, CALL_OPEN, CALL_TAIL, COMPACT, SPACED, call_head

TOOLS_INTRO = ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
               "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
TOOLS_OUTRO = ("</tools>\n\nFor each function call, return a json object with function name and "
               "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
               '{"name":<function-name>,"arguments":<args-json-object>}\n</tool_call>')
RESPONSE_OPEN, RESPONSE_CLOSE = "<tool_response>\n", "\n</tool_response>"
CALL = re.compile(re.escape(CALL_OPEN.strip()) + r"\s*(\{.*?\})\s*" + re.escape(CALL_CLOSE.strip()),
                  re.S)
ARGUMENTS = re.compile(r'\{\s*"name"\s*:\s*"(?:[^"\\]|\\.)*"\s*,\s*"arguments"\s*:\s*(.*?)\s*\}\s*$', re.S)


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str        # JSON text, as written


@dataclass(frozen=True)
class CallSyntax:
    """How tools reach a model's template and how its calls are spaced."""
    native: bool                     # the template renders tools, calls and results itself
    separators: "tuple[str, str]"    # JSON's (item, key) separators in a call

    @property
    def spacing(self) -> dict:
        return {"ensure_ascii": False, "separators": self.separators}


FALLBACK = CallSyntax(False, COMPACT)   # chatdb's own text, compact JSON
HERMES = CallSyntax(True, SPACED)       # Qwen2.5's / Hermes' templates (json.dumps spacing)


def tools_text(system: str, functions: list[dict]) -> str:
    """The system message that lists `functions` (OpenAI's {type, function} entries)."""
    listed = "\n".join(json.dumps(f, ensure_ascii=False) for f in functions)
    tools = f"{TOOLS_INTRO}\n{listed}\n{TOOLS_OUTRO}"
    return f"{system}\n\n{tools}" if system else tools


def call_text(calls: list[ToolCall], syntax: CallSyntax = FALLBACK) -> str:
    """How calls are written in an answer (the grammar of tool_call_grammar, exactly)."""
    return "\n".join(call_head(c.name, syntax.separators) + canonical_arguments(c.arguments, syntax)
                     + CALL_TAIL for c in calls)


def canonical_arguments(arguments: str, syntax: CallSyntax = FALLBACK) -> str:
    """Arguments as the grammar writes them (JSON spaced as `syntax` spaces it); text that
    is not JSON as it is."""
    try:
        return json.dumps(json.loads(arguments), **syntax.spacing)
    except ValueError:
        return arguments


def split_calls(text: str) -> "tuple[str, list[ToolCall]]":
    """An answer's text before its first call, and its well-formed calls (their arguments
    as the model wrote them, as they are streamed; compact JSON where that cannot be cut
    out of the call)."""
    calls, first = [], None
    for match in CALL.finditer(text):
        try:
            call = json.loads(match[1])
        except ValueError:
            continue
        if isinstance(call, dict) and isinstance(call.get("name"), str):
            first = match.start() if first is None else first
            calls.append(ToolCall(call["name"], _written_arguments(match[1], call.get("arguments", {}))))
    return (text if first is None else text[:first].rstrip()), calls


def _written_arguments(call: str, arguments) -> str:
    written = ARGUMENTS.match(call)
    if written is not None:
        try:
            if json.loads(written[1]) == arguments:
                return written[1]
        except ValueError:
            pass
    return json.dumps(arguments, ensure_ascii=False, separators=COMPACT)


def split_tools(system: str) -> "tuple[str, list[dict]] | None":
    """A system message's own text and the functions `tools_text` listed in it; None when
    it lists none."""
    at = system.rfind(TOOLS_INTRO)
    if at < 0 or not system.endswith(TOOLS_OUTRO):
        return None
    listed = system[at + len(TOOLS_INTRO):len(system) - len(TOOLS_OUTRO)].strip("\n")
    try:
        functions = [json.loads(line) for line in listed.split("\n") if line]
    except ValueError:
        return None
    own = system[:at]
    own = own[:-2] if own.endswith("\n\n") else own
    return own, functions


def as_template_message(role: str, content: str) -> dict:
    """A stored message as a template without tool support reads it: a tool result is a
    user turn in <tool_response> tags (as Qwen's template writes it; templates without a
    `tool` role, and those that refuse roles other than user and assistant, read it too)."""
    if role == "tool":
        return {"role": "user", "content": RESPONSE_OPEN + content + RESPONSE_CLOSE}
    return {"role": role, "content": content}


def as_native_message(role: str, content: str, syntax: CallSyntax) -> dict:
    """A stored message as a template with tool support reads it: a system message that
    lists tools gives them as `tools` (ChatTemplate passes them as the template's `tools`
    variable); an assistant's calls become `tool_calls` ({type, function: {name,
    arguments}}, the arguments an object, which Qwen's template writes with tojson and
    Hermes' too) where its text is exactly what the template writes for them, else it is
    read as written; a result is a `tool` message."""
    if role == "system":
        split = split_tools(content)
        if split is not None:
            return {"role": "system", "content": split[0], "tools": split[1]}
    if role == "assistant":
        text, calls = split_calls(content)
        if calls and (f"{text}\n" if text else "") + call_text(calls, syntax) == content:
            return {"role": "assistant", "content": text, "tool_calls": [
                {"type": "function", "function": {"name": c.name, "arguments": json.loads(c.arguments)}}
                for c in calls]}
    return {"role": role, "content": content}
