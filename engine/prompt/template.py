"""Chat templates: the model's own Jinja template, sandboxed, else ChatML.

Each message's tokens are the exact tokens it adds to the prompt: the text
the template renders for the path up to it, minus what the path before it
rendered. That only works where the template is prefix-stable (rendering a
longer path extends the shorter one); `message_texts` says when it is not.

Rendered as Hugging Face's apply_chat_template renders (what models are
trained on): `tojson` is its filter (no HTML escaping, keys in their order,
json.dumps' spacing), and the functions a system message carries (its
"tools" key, tool_format.as_native_message) are the template's `tools`.
"""

import json
from dataclasses import dataclass
from functools import cached_property

from jinja2 import BaseLoader, TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ..errors import EngineError
from .tool_format import CallSyntax
from .tool_support import call_syntax

CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


class TemplateUnstable(EngineError):
    """The template re-renders earlier messages differently as the chat grows."""


class TemplateFailed(EngineError):
    """The template refused the conversation (its raise_exception) or failed rendering it."""


class _Refused(TemplateError):
    pass


def _raise(message: str):
    raise _Refused(message)


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    """Hugging Face's tojson, which chat templates are written for (Jinja's own escapes
    HTML characters and sorts keys)."""
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _with_tools(messages: list[dict]) -> "tuple[list[dict], dict]":
    """The messages as the template reads them, and the `tools` variable where the first
    one carries functions."""
    tools = messages[0].get("tools") if messages else None
    if not tools:
        return messages, {}
    first = {k: v for k, v in messages[0].items() if k != "tools"}
    return [first] + messages[1:], {"tools": tools}


@dataclass
class ChatTemplate:
    source: str
    bos_token: str = ""
    eos_token: str = ""

    def __post_init__(self):
        env = ImmutableSandboxedEnvironment(loader=BaseLoader(), trim_blocks=True, lstrip_blocks=True)
        env.filters["tojson"] = _tojson
        self._template = env.from_string(self.source)

    @cached_property
    def tool_syntax(self) -> CallSyntax:
        """How tools reach this template (tool_support.call_syntax: natively or not)."""
        return call_syntax(self)

    def render(self, messages: list[dict], add_generation_prompt: bool) -> str:
        messages, tools = _with_tools(messages)
        try:
            return self._template.render(
                messages=messages, add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token, eos_token=self.eos_token, raise_exception=_raise,
                **tools)
        except _Refused as exc:
            raise TemplateFailed(f"the model's chat template refuses this conversation: {exc}") from None
        except Exception as exc:  # a template's own bug (undefined name, bad filter, ...)
            raise TemplateFailed(f"the model's chat template failed: {type(exc).__name__}: {exc}") from None

    def boundary(self, messages: list[dict]) -> str:
        """The prompt text that the messages cover, through the last one."""
        return self.render(messages, add_generation_prompt=False) if messages else ""

    def generation_prompt(self, messages: list[dict]) -> str:
        """What opens the answer after `messages` (ChatML: '<|im_start|>assistant\\n').

        It belongs to the answer, not to the question: a question left
        unanswered (a crash) is then followed by the next one cleanly.
        """
        messages = _near(messages)   # it follows the last messages (as message_text)
        closed = self.boundary(messages)
        opened = self.render(messages, add_generation_prompt=True)
        if not opened.startswith(closed):
            raise TemplateUnstable("the generation prompt changes the text before it")
        return opened[len(closed):]

    def message_texts(self, messages: list[dict]) -> list[str]:
        """The text each message adds to the prompt, in order."""
        texts, previous = [], ""
        for i in range(len(messages)):
            current = self.boundary(messages[: i + 1])
            if not current.startswith(previous):
                raise TemplateUnstable(f"message {i} changes the text rendered before it")
            texts.append(current[len(previous):])
            previous = current
        return texts

    def message_text(self, before: list[dict], message: dict) -> str:
        """The text `message` adds after the path `before` (one message's worth).

        Rendered after the last CONTEXT_MESSAGES of `before` only (and its system
        prompt): a template renders a message from its neighbours (the turn before
        it, whether it is the first), and rendering the whole path for each of its
        messages made reading a long imported chat quadratic (1,000 messages: 45 s).
        The cut leaves an even number out, so a template's alternation checks (role
        by position) see each message where it was.
        """
        before = _near(before)
        previous = self.boundary(before)
        current = self.boundary(before + [message])
        if not current.startswith(previous):
            raise TemplateUnstable("the template is not prefix-stable")
        return current[len(previous):]


CONTEXT_MESSAGES = 4


def _near(before: list[dict]) -> list[dict]:
    """The system prompt (if first) and the last CONTEXT_MESSAGES or so of `before`."""
    head = 1 if before and before[0].get("role") == "system" else 0
    cut = len(before) - head - CONTEXT_MESSAGES
    if cut <= 0:
        return before
    cut -= cut % 2
    return before[:head] + before[head + cut:]
