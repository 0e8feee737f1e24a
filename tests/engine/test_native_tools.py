"""Tools rendered with the model's own chat template where it has tool support (Qwen2.5's,
the real text, in a tiny model's file), and chatdb's fallback where it has none."""

from pathlib import Path

import pytest

from engine.prompt.template import CHATML, ChatTemplate
from engine.prompt.tool_format import (FALLBACK, HERMES, ToolCall, as_native_message, call_text,
                                       tools_text)
from engine.prompt.tool_support import call_syntax

QWEN = (Path(__file__).parents[1] / "assets" / "qwen2.5_chat_template.jinja").read_text()

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
CALL = ToolCall("get_weather", '{"city":"Paris"}')

# What Qwen2.5's template writes for this conversation (as transformers' apply_chat_template
# writes it: tojson without HTML escaping, json.dumps' spacing).
QWEN_TEXT = (
    "<|im_start|>system\nYou are terse.\n\n# Tools\n\nYou may call one or more functions to assist "
    "with the user query.\n\nYou are provided with function signatures within <tools></tools> XML "
    'tags:\n<tools>\n{"type": "function", "function": {"name": "get_weather", "description": '
    '"The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": '
    '"string"}}, "required": ["city"]}}}\n</tools>\n\nFor each function call, return a json object '
    "with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
    "<|im_start|>user\nWeather in Paris & Rome?<|im_end|>\n"
    '<|im_start|>assistant\nLet me look.\n<tool_call>\n{"name": "get_weather", "arguments": '
    '{"city": "Paris"}}\n</tool_call><|im_end|>\n'
    "<|im_start|>user\n<tool_response>\n18 °C, <sunny>\n</tool_response><|im_end|>\n")


def _conversation(archive, syntax):
    conv = archive.create_conversation("tools")
    messages = [("system", tools_text("You are terse.", [WEATHER])),
                ("user", "Weather in Paris & Rome?"),
                ("assistant", "Let me look.\n" + call_text([CALL], syntax)),
                ("tool", "18 °C, <sunny>")]
    parent = None
    for role, content in messages:
        parent = archive.add_message(conv.id, role, content, parent_id=parent and parent.id)
    return archive.path(parent.id)


def _text(engine, tokens) -> str:
    return b"".join(engine.model.piece(int(t), special=True) for t in tokens).decode()


def test_the_templates_own_tool_support_renders_tools_calls_and_results(open_engine, tools_model_path):
    archive, engine = open_engine(model_path=tools_model_path)
    assert engine.prompts.template.tool_syntax == HERMES
    path = _conversation(archive, HERMES)
    tokens = engine.prompts.path_tokens(path)
    assert tokens.stable
    assert _text(engine, tokens.flat()) == QWEN_TEXT
    # each message's own part: the call is the assistant's turn, the result a user turn
    texts = [_text(engine, a) for a in tokens.arrays]
    assert texts[2].startswith("<|im_start|>assistant\nLet me look.\n<tool_call>\n")
    assert texts[3] == "<|im_start|>user\n<tool_response>\n18 °C, <sunny>\n</tool_response><|im_end|>\n"
    assert _text(engine, engine.prompts.generation_tokens(path)) == "<|im_start|>assistant\n"
    assert engine.prompts.chat(path)[2]["tool_calls"] == [{"type": "function", "function": {
        "name": "get_weather", "arguments": {"city": "Paris"}}}]


def test_a_call_written_otherwise_is_read_as_written():
    """Text the template would not write for the call (two newlines before it) is given to
    the template as the model wrote it, so the prompt holds what was generated."""
    content = "Let me look.\n\n" + call_text([CALL], HERMES)
    assert as_native_message("assistant", content, HERMES) == {"role": "assistant", "content": content}
    system = as_native_message("system", tools_text("", [WEATHER]), HERMES)
    assert system == {"role": "system", "content": "", "tools": [WEATHER]}


def test_an_answers_tokens_in_the_templates_syntax_are_kept_exact(open_engine, tools_model_path):
    """An answer that is a call, as the grammar writes it, is the template's own rendering of
    that call: its generated tokens are stored as they are (answer_tokens is not None)."""
    archive, engine = open_engine(model_path=tools_model_path)
    path = _conversation(archive, HERMES)[:2]
    before = engine.prompts.chat(path)
    content = call_text([CALL], HERMES)
    opening = engine.prompts.generation_tokens(path)
    generated = engine.model.tokenize(content, special=False)
    exact = engine.prompts.answer_tokens(before, opening, content, generated)
    assert exact is not None and exact[:len(opening) + len(generated)] == opening + generated
    assert _text(engine, exact).endswith('{"city": "Paris"}}\n</tool_call><|im_end|>\n')


def test_a_template_without_tool_support_gets_chatdbs_format(open_engine):
    archive, engine = open_engine()     # SmolLM2: ChatML, no tools
    assert engine.prompts.template.tool_syntax == FALLBACK
    path = _conversation(archive, FALLBACK)
    text = _text(engine, engine.prompts.path_tokens(path).flat())
    assert f"<|im_start|>system\n{path[0].content}<|im_end|>" in text
    assert '<|im_start|>assistant\nLet me look.\n<tool_call>\n{"name":"get_weather","arguments":' \
           '{"city":"Paris"}}\n</tool_call><|im_end|>' in text
    assert text.endswith("<|im_start|>user\n<tool_response>\n18 °C, <sunny>\n</tool_response><|im_end|>\n")


LLAMA31_LIKE = (  # tools, but calls as bare JSON with "parameters" (Llama 3.1's syntax)
    "{% for m in messages %}{% if m.tool_calls %}{% for c in m.tool_calls %}"
    '{{ {"name": c.function.name, "parameters": c.function.arguments} | tojson }}'
    "{% endfor %}{% else %}{{ m.role }}: {{ m.content }}\n{% endif %}{% endfor %}"
    "{% if tools %}{{ tools | tojson }}{% endif %}")


@pytest.mark.parametrize("source, syntax", [
    (QWEN, HERMES),
    (CHATML, FALLBACK),
    (LLAMA31_LIKE, FALLBACK),
    ("{{ raise_exception('no tools here') if tools }}{{ messages[0].content }}", FALLBACK),
])
def test_tool_support_is_told_by_rendering_the_template(source, syntax):
    assert call_syntax(ChatTemplate(source)) == syntax
