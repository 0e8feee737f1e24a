"""Per-message tokens concatenate to the tokens of the whole rendered prompt."""

import numpy as np

from engine.prompt.path_tokens import as_chat
from engine.prompt.template import CHATML, ChatTemplate, TemplateUnstable

import pytest


def _conversation(archive, system=None):
    conv = archive.create_conversation("t", system_prompt=system)
    for role, text in [("user", "Hi there! Café? 日本語も"), ("assistant", "Hello. How can I help?"),
                       ("user", "Write `x = 1`\nand a newline.")]:
        archive.add_message(conv.id, role, text)
    return conv


@pytest.mark.parametrize("system", [None, "You are terse."])
def test_concatenation_equals_whole_tokenization(open_engine, system):
    archive, engine = open_engine()
    conv = _conversation(archive, system)
    path = archive.messages(conv.id)
    per_message = engine.prompts.path_tokens(path)
    assert per_message.stable
    whole = engine.model.tokenize(engine.chat_format.template.render(as_chat(path), True))
    opening = engine.prompts.generation_tokens(path)
    assert per_message.flat().tolist() + opening == whole
    # Stored: a second call reads the same arrays back from the archive.
    again = engine.prompts.path_tokens(path)
    assert all(np.array_equal(a, b) for a, b in zip(per_message.arrays, again.arrays))
    assert archive.tokens.get(path[-1].id, engine.tokenizer) is not None


def test_unstable_template_is_detected():
    # Renders only the last message: earlier text changes as the chat grows.
    template = ChatTemplate("{{ messages[-1]['content'] }}")
    with pytest.raises(TemplateUnstable):
        template.message_texts([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])
    chatml = ChatTemplate(CHATML)
    user = [{"role": "user", "content": "a"}]
    assert chatml.message_texts(user + user) == ["<|im_start|>user\na<|im_end|>\n"] * 2
    assert chatml.generation_prompt(user) == "<|im_start|>assistant\n"
