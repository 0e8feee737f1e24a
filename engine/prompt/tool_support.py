"""Whether a chat template has tool support chatdb can use, told by rendering it.

The rule: the template's source names `tools`, and given a probe
conversation (a function in `tools`, an assistant message with two
structured `tool_calls`, a `tool` result) it renders the function's name,
the calls as Hermes-style blocks,

    <tool_call>
    {"name": "probe_function", "arguments": {"probe_argument": 1}}
    </tool_call>

one after another on their own lines, with json.dumps' spacing (Qwen2.5's and
Hermes' templates) or none, and the result's text. Those are the calls
chatdb parses and constrains with grammars, so such a template is used for
tools as it is (HERMES, or compact spacing). Any other template (no tool
support, or calls in another syntax: Llama 3.1's JSON without tags,
Mistral's [TOOL_CALLS]) gets chatdb's own format through its plain turns
(FALLBACK).
"""

import json

from ..llama.grammar import COMPACT, SPACED
from .tool_format import FALLBACK, CallSyntax, ToolCall, call_text

PROBE_NAME, PROBE_RESULT = "probe_function", "probe result 8271"
PROBE_TOOL = {"type": "function", "function": {
    "name": PROBE_NAME, "description": "A probe.",
    "parameters": {"type": "object", "properties": {"probe_argument": {"type": "integer"}}}}}
PROBE_CALLS = [{"name": PROBE_NAME, "arguments": {"probe_argument": 1}},
               {"name": PROBE_NAME, "arguments": {"probe_argument": 2}}]


def call_syntax(template) -> CallSyntax:
    """How `template` (a ChatTemplate) takes tools: natively, and with which spacing, or not."""
    if "tools" not in template.source:
        return FALLBACK
    probe = [{"role": "system", "content": "probe system", "tools": [PROBE_TOOL]},
             {"role": "user", "content": "probe question"},
             {"role": "assistant", "content": "", "tool_calls": [
                 {"type": "function", "function": call} for call in PROBE_CALLS]},
             {"role": "tool", "content": PROBE_RESULT}]
    try:
        text = template.render(probe, add_generation_prompt=True)
    except Exception:   # a template that refuses the probe (its own checks): not for tools
        return FALLBACK
    for separators in (SPACED, COMPACT):
        syntax = CallSyntax(True, separators)
        calls = call_text([ToolCall(c["name"], json.dumps(c["arguments"])) for c in PROBE_CALLS],
                          syntax)
        if calls in text and PROBE_RESULT in text and text.count(PROBE_NAME) > len(PROBE_CALLS):
            return syntax
    return FALLBACK
