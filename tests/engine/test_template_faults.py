"""Chat templates that fail: the real model, given the template a GGUF file might carry."""

import pytest

from engine.errors import EngineError
from engine.llama.model import Model

# A user message renders with a mark only while it is the last one (as some
# templates treat "the current query"): answering it changes the text before.
LAST_QUERY = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
    "{% if m['role'] == 'user' and loop.last %} (now){% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
REFUSING = ("{% if messages[0]['role'] != 'system' %}"
            "{{ raise_exception('Conversations must start with a system message') }}{% endif %}"
            "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture
def template_in_file(monkeypatch):
    """template_in_file(source): the model file's tokenizer.chat_template reads as `source`."""
    real = Model.metadata

    def use(source: str) -> None:
        monkeypatch.setattr(Model, "metadata",
                            lambda self: {**real(self), "tokenizer.chat_template": source})
    return use


def test_a_template_that_is_not_prefix_stable_keeps_the_answer(open_engine, template_in_file):
    template_in_file(LAST_QUERY)
    warnings = []
    archive, engine = open_engine(warn=warnings.append)
    conv = archive.create_conversation("t")
    first = engine.reply(conv.id, "Name a colour.")
    assert first.text
    assert archive.message(first.message_id).content == first.text
    assert any("tokens are not stored" in w for w in warnings)
    second = engine.reply(conv.id, "And another?")
    assert [m.content for m in archive.messages(conv.id)] == [
        "Name a colour.", first.text, "And another?", second.text]


def test_raise_exception_in_a_template_is_one_line_and_writes_nothing(open_engine, template_in_file):
    template_in_file(REFUSING)
    archive, engine = open_engine()
    conv = archive.create_conversation("t")
    with pytest.raises(EngineError) as raised:
        engine.reply(conv.id, "Hello")
    assert str(raised.value) == ("the model's chat template refuses this conversation: "
                                 "Conversations must start with a system message")
    assert archive.messages(conv.id) == [] and archive.count_messages() == 0
    with_system = archive.create_conversation("s", system_prompt="Be brief.")
    assert engine.reply(with_system.id, "Hello").text


def test_a_template_jinja_cannot_compile_is_said_not_silent(open_engine, template_in_file):
    template_in_file("{% for m in messages %}{{ m['content'] }")   # unclosed
    warnings = []
    archive, engine = open_engine(warn=warnings.append)
    assert len(warnings) == 1
    assert warnings[0].startswith("the model's chat template does not compile (TemplateSyntaxError")
    assert warnings[0].endswith("using ChatML instead")
    conv = archive.create_conversation("t")
    assert engine.reply(conv.id, "Hello").text
