"""Chat formats for models whose file has no template: llama.cpp's built-in ones.

llama.cpp knows the formats of the common families (gemma, llama3, phi3,
...) and renders them with `llama_chat_apply_template`. Some of them trim
message text; chatdb renders placeholders instead and puts each message's
text back verbatim, so an answer's tokens stay the exact tokens the model
produced. A family is chosen by the file's architecture, and only if the
format's markers are single tokens of its vocabulary; otherwise ChatML.
"""

import ctypes
from dataclasses import dataclass

import llama_cpp

from .template import ChatTemplate

PREFIX = "llama.cpp:"

# architecture names -> (built-in format, marker tokens the vocabulary must have)
FAMILIES = [
    (("gemma", "gemma2", "gemma3", "gemma3n"), "gemma", ("<start_of_turn>", "<end_of_turn>")),
    (("llama",), "llama3", ("<|start_header_id|>", "<|eot_id|>")),
    (("llama4",), "llama4", ("<|header_start|>", "<|eot|>")),
    (("phi3",), "phi3", ("<|user|>", "<|end|>", "<|assistant|>")),
    (("command-r", "cohere2"), "command-r", ("<|START_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>")),
    (("granite", "granitemoe", "granitehybrid"), "granite", ("<|start_of_role|>", "<|end_of_role|>")),
    (("llama", "mistral3"), "mistral-v7", ("[INST]", "[/INST]", "[SYSTEM_PROMPT]")),
]


def _placeholder(i: int) -> str:
    return f"\x02{i}\x03"


@dataclass
class BuiltinTemplate(ChatTemplate):
    """A llama.cpp built-in format; `source` is 'llama.cpp:NAME'.

    llama.cpp's formats leave the BOS token to the tokenizer; chatdb
    tokenizes without it, so the text starts with it where the vocabulary
    asks for one (`add_bos`).
    """

    add_bos: bool = False

    def __post_init__(self):
        self.name = self.source[len(PREFIX):]

    def render(self, messages: list[dict], add_generation_prompt: bool) -> str:
        keep = [ctypes.create_string_buffer(m["role"].encode()) for m in messages]
        marks = [ctypes.create_string_buffer(_placeholder(i).encode()) for i in range(len(messages))]
        chat = (llama_cpp.llama_chat_message * max(1, len(messages)))()
        for i in range(len(messages)):
            chat[i].role, chat[i].content = ctypes.addressof(keep[i]), ctypes.addressof(marks[i])
        text = _apply(self.name.encode(), chat, len(messages), add_generation_prompt)
        for i, message in enumerate(messages):  # verbatim text, not llama.cpp's trimmed copy
            text = text.replace(_placeholder(i), message["content"])
        return self.bos_token + text if self.add_bos and messages else text


def _apply(name: bytes, chat, n: int, add_ass: bool) -> str:
    size = 256 + 64 * n
    while True:
        buf = ctypes.create_string_buffer(size)
        written = llama_cpp.llama_chat_apply_template(name, chat, n, add_ass, buf, size)
        if written < 0:
            raise ValueError(f"llama.cpp does not know the chat format {name.decode()}")
        if written <= size:
            return buf.raw[:written].decode("utf-8")
        size = written + 1


def builtin_names() -> set[str]:
    n = llama_cpp.llama_chat_builtin_templates(None, 0)
    names = (ctypes.c_char_p * n)()
    llama_cpp.llama_chat_builtin_templates(names, n)
    return {name.decode() for name in names}


def family_format(architecture: str, is_single_token) -> "str | None":
    """The built-in format for this architecture whose markers the vocabulary has, if any."""
    known = builtin_names()
    for archs, name, markers in FAMILIES:
        if architecture in archs and name in known and all(map(is_single_token, markers)):
            return name
    return None
