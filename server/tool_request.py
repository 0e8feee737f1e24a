"""`tools`, `tool_choice` and `parallel_tool_calls`: which functions the model may call, and how.

`auto` lets the model write text or calls (a lazy grammar holds a call, once
begun, to the function's parameters); `required` and a named function make
the answer calls only, their arguments constrained to the parameters'
schema; `none` lists the tools but takes no calls.
"""

import re
from dataclasses import dataclass

from engine.llama.grammar import COMPACT, Grammar, GrammarError, tool_call_grammar

from .errors import bad_field

NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MODES = ("none", "auto", "required")


@dataclass(frozen=True)
class Tool:
    name: str
    spec: dict            # the request's {type: function, function: {...}}
    parameters: dict


@dataclass(frozen=True)
class ToolChoice:
    mode: str = "none"            # none | auto | required | named
    name: "str | None" = None
    parallel: bool = True
    grammar: "Grammar | None" = None

    @property
    def takes_calls(self) -> bool:
        return self.mode != "none"


def read_tools(value) -> list[Tool]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad_field("tools", "'tools' must be an array of {type: function, function}")
    tools = []
    for i, entry in enumerate(value):
        where = f"tools[{i}]"
        function = entry.get("function") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or entry.get("type") != "function" or not isinstance(function, dict):
            raise bad_field(where, f"'{where}' must be {{type: function, function: {{name, ...}}}}")
        name = function.get("name")
        if not isinstance(name, str) or not NAME.match(name):
            raise bad_field(f"{where}.function.name", f"'{where}.function.name' must be 1 to 64 "
                            "letters, digits, _ or -")
        if any(t.name == name for t in tools):
            raise bad_field(f"{where}.function.name", f"'{where}.function.name': {name} is listed twice")
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(parameters, dict):
            raise bad_field(f"{where}.function.parameters",
                            f"'{where}.function.parameters' must be a JSON schema object")
        try:
            tool_call_grammar([(name, parameters)], False)
        except GrammarError as exc:
            raise bad_field(f"{where}.function.parameters", f"'{where}.function.parameters': {exc}") from None
        tools.append(Tool(name, {"type": "function", "function": function}, parameters))
    return tools


def read_tool_call(body: dict, tools: list[Tool], separators=COMPACT) -> ToolChoice:
    """tool_choice (default auto with tools, none without) and parallel_tool_calls; the
    calls' grammar spaces their JSON with `separators` (the model's template's)."""
    choice = body.get("tool_choice")
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise bad_field("parallel_tool_calls", "'parallel_tool_calls' must be true or false")
    parallel = True if parallel is None else parallel
    if choice is None:
        choice = "auto" if tools else "none"
    if isinstance(choice, str):
        if choice not in MODES:
            raise bad_field("tool_choice", f"'tool_choice' must be none, auto, required or "
                            f"{{type: function, function: {{name}}}} (got {choice!r})")
        if choice != "none" and not tools:
            raise bad_field("tool_choice", f"'tool_choice' {choice} needs 'tools'")
        name, mode = None, choice
    else:
        function = choice.get("function") if isinstance(choice, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str):
            raise bad_field("tool_choice", "'tool_choice' must be none, auto, required or "
                            "{type: function, function: {name}}")
        if not any(t.name == name for t in tools):
            raise bad_field("tool_choice", f"'tool_choice' names {name}, which is not in 'tools'")
        mode = "named"
    if mode == "none":
        return ToolChoice("none", None, parallel)
    chosen = [(t.name, t.parameters) for t in tools if name is None or t.name == name]
    grammar = tool_call_grammar(chosen, parallel and mode != "named", lazy=mode == "auto",
                                separators=separators)
    return ToolChoice(mode, name, parallel, grammar)
