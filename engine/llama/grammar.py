"""Grammars (llama.cpp's GBNF) that constrain sampling: JSON, JSON matching a schema, tool calls.

The schema conversion is llama.cpp's own (llama_cpp.llama_grammar, a port of
its json_schema_to_grammar), checked and completed by schema_rules.Converter:
objects, required and optional properties, enums, consts, arrays with item
counts, nested definitions ($ref), string lengths and formats, integer and
number ranges; a keyword the grammar cannot enforce is refused (GrammarError
naming it), never ignored. Two rules are tightened: a string may
not hold a raw control character (JSON forbids it, and json.loads refuses
it), and tool calls are written with fixed spacing (none, or Python's
json.dumps spacing where the model's template writes calls so), so the text
a model writes for a call is exactly the text chatdb renders for it when a
client sends the call back (the archive then finds the same message).
"""

import json
import re
from dataclasses import dataclass

from llama_cpp.llama_grammar import JSON_GBNF

from .schema_rules import Converter, GrammarError

# JSON's string character, as llama.cpp's json.gbnf writes it: no raw control characters.
STRICT_CHAR = r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})'
CALL_OPEN, CALL_CLOSE = "<tool_call>\n", "\n</tool_call>"
CALL_TAIL = "}" + CALL_CLOSE   # after a call's arguments
COMPACT, SPACED = (",", ":"), (", ", ": ")   # JSON's item and key separators in a call
# The converter's optional space after a separator, as it writes it in its rules
_SEPARATOR_SPACE = re.compile(r'"([,:])" space(?![\w-])')


def call_head(name: str, separators: "tuple[str, str]" = COMPACT) -> str:
    """A call's text up to its arguments: `<tool_call>\\n{"name":"NAME","arguments":`, spaced
    by `separators` (what the grammar writes, and tool_format.call_text renders)."""
    item, key = separators
    return CALL_OPEN + '{"name"' + key + json.dumps(name) + item + '"arguments"' + key


@dataclass(frozen=True)
class Grammar:
    """A GBNF grammar; `trigger` set: lazy, applied from the first match of that text on."""
    text: str
    trigger: "str | None" = None


def json_grammar(schema: "dict | None") -> Grammar:
    """Any JSON object (schema None), or JSON matching `schema`."""
    if schema is None:
        return Grammar(JSON_GBNF)
    converter = _converter()
    _visit(converter, schema, "")
    return Grammar(_format(converter, compact=False))


def tool_call_grammar(functions: "list[tuple[str, dict]]", parallel: bool,
                      lazy: bool = False, separators: "tuple[str, str]" = COMPACT) -> Grammar:
    """Calls of the (name, parameters schema) functions, each written as
    `<tool_call>\\n{"name":"NAME","arguments":{...}}\\n</tool_call>`, one or (parallel)
    several; `lazy`: free text until the model opens a call (tool_choice auto).
    `separators`: COMPACT as above, or SPACED (`{"name": "NAME", "arguments": {"a": 1}}`,
    json.dumps' own spacing) for the whole call, arguments included."""
    converter = _converter()
    alternatives = []
    for i, (name, parameters) in enumerate(functions):
        args = _visit(converter, parameters or {"type": "object"}, f"f{i}-args")
        head = json.dumps(call_head(name, separators))
        tail = json.dumps(CALL_TAIL)
        alternatives.append(converter._add_rule(f"f{i}-call", f"{head} {args} {tail}"))
    converter._add_rule("call", " | ".join(alternatives))
    converter._add_rule("root", 'call ("\\n" call)*' if parallel else "call")
    return Grammar(_format(converter, compact=True, spaced=separators == SPACED),
                   CALL_OPEN.strip() if lazy else None)


def _converter() -> Converter:
    return Converter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)


def _visit(converter: Converter, schema, name: str) -> str:
    if not isinstance(schema, dict):
        raise GrammarError("a JSON schema must be an object")
    try:
        resolved = converter.resolve_refs(json.loads(json.dumps(schema)), "request")
        return converter.visit(resolved, name)
    except GrammarError:
        raise
    except Exception as exc:  # the converter asserts and raises as it meets what it cannot do
        raise GrammarError(f"the schema cannot be turned into a grammar: {exc or type(exc).__name__}") from None


def _format(converter: Converter, compact: bool, spaced: bool = False) -> str:
    """`compact`: no optional spaces; `spaced` as well: one space after each `,` and `:`."""
    rules = converter._rules
    if "char" in rules:
        rules["char"] = STRICT_CHAR
    if compact:
        rules["space"] = '""'
    if spaced:
        for name, rule in rules.items():
            rules[name] = _SEPARATOR_SPACE.sub(r'"\1 "', rule)
    return converter.format_grammar()
