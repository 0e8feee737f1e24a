"""A completion's prompt as the model reads it: its text, or fill-in-the-middle around a suffix.

Raw text is tokenized as llama.cpp's server does (special tokens parsed,
BOS first where the vocabulary asks for it). With a suffix, the model's own
fill-in-the-middle tokens frame the two parts (prefix, suffix, middle, in
that order, as llama.cpp's server writes an infill prompt); a model without
them cannot fill a middle, and says so.
"""

import llama_cpp

from ..errors import EngineError, PromptTooLong
from ..llama.model import Model


class NoFillInTheMiddle(EngineError):
    pass


class EmptyPrompt(EngineError):
    """No token to read: an empty prompt, and a model that puts no BOS first."""


class CompletionPrompts:
    def __init__(self, model: Model):
        self.model = model
        vocab = model.vocab
        self.bos = ([llama_cpp.llama_vocab_bos(vocab)]
                    if llama_cpp.llama_vocab_get_add_bos(vocab) else [])
        self.fim = (llama_cpp.llama_vocab_fim_pre(vocab), llama_cpp.llama_vocab_fim_suf(vocab),
                    llama_cpp.llama_vocab_fim_mid(vocab))

    @property
    def fills_middles(self) -> bool:
        return all(token >= 0 for token in self.fim)

    def tokens(self, prompt: str, suffix: "str | None" = None) -> list[int]:
        """The prompt's tokens; PromptTooLong unless an answer's first token fits after them."""
        if suffix is None:
            tokens = self.bos + self.model.tokenize(prompt)
        elif not self.fills_middles:
            raise NoFillInTheMiddle("this model has no fill-in-the-middle tokens: a suffix "
                                    "cannot be filled in")
        else:
            pre, suf, mid = self.fim
            tokens = (self.bos + [pre] + self.model.tokenize(prompt, special=False) + [suf]
                      + self.model.tokenize(suffix, special=False) + [mid])
        if not tokens:
            raise EmptyPrompt("the prompt is empty, and this model begins a text with no token "
                              "of its own: there is nothing to continue")
        if len(tokens) >= self.model.n_ctx:
            raise PromptTooLong(f"the prompt is {len(tokens)} tokens; the context holds "
                                f"{self.model.n_ctx}")
        return tokens

    def text(self, tokens) -> str:
        return b"".join(self.model.piece(t) for t in tokens).decode("utf-8", errors="replace")
