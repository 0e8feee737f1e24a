"""How a model's chats are written: its template, chosen from the file, and its turn markers.

The file's own template; without one, its family's format where llama.cpp
has it built in (chosen by the file's architecture when the format's marker
tokens are in its vocabulary), else ChatML. A template Jinja cannot compile
is said in `warning`, and ChatML is used instead.
"""

from dataclasses import dataclass

import llama_cpp

from ..llama.model import Model
from .builtin_template import PREFIX, BuiltinTemplate, family_format
from .template import CHATML, ChatTemplate
from .turn_markers import turn_markers


@dataclass(frozen=True)
class ChatFormat:
    template: ChatTemplate
    markers: list[str]        # written as text, they end an answer (turn_markers.py)
    warning: str = ""         # why the file's template could not be used

    @classmethod
    def of(cls, model: Model) -> "ChatFormat":
        template, warning = _template(model)
        return cls(template, turn_markers(template), warning)

    @property
    def kind(self) -> str:
        """'model' (the file's own), 'llama.cpp:NAME' (its family's built-in format) or 'chatml'."""
        if isinstance(self.template, BuiltinTemplate):
            return self.template.source
        return "chatml" if self.template.source == CHATML else "model"


def _template(model: Model) -> "tuple[ChatTemplate, str]":
    """(the template, a warning when the file's own could not be used)."""
    source = model.metadata().get("tokenizer.chat_template")
    bos = model.piece(llama_cpp.llama_vocab_bos(model.vocab), special=True).decode(errors="replace")
    eos = model.piece(llama_cpp.llama_vocab_eos(model.vocab), special=True).decode(errors="replace")
    if source:
        try:
            return ChatTemplate(source, bos_token=bos, eos_token=eos), ""
        except Exception as exc:  # a template this Jinja cannot compile: say so, chat in ChatML
            return ChatTemplate(CHATML, bos_token=bos, eos_token=eos), (
                f"the model's chat template does not compile "
                f"({type(exc).__name__}: {' '.join(str(exc).split())}); using ChatML instead")
    family = family_format(model.metadata().get("general.architecture", ""),
                           lambda text: len(model.tokenize(text)) == 1)
    if family is not None:
        return BuiltinTemplate(PREFIX + family, bos_token=bos, eos_token=eos,
                               add_bos=llama_cpp.llama_vocab_get_add_bos(model.vocab)), ""
    return ChatTemplate(CHATML, bos_token=bos, eos_token=eos), ""
