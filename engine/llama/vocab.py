"""Whether two models share a vocabulary (a draft model must share the target's)."""

import llama_cpp

from ..errors import EngineError
from .model import Model


def check_same_vocab(target: Model, draft: Model) -> None:
    if target.n_vocab != draft.n_vocab:
        raise EngineError(f"the draft model's vocabulary has {draft.n_vocab} tokens, "
                          f"the target's {target.n_vocab}: they must share one")
    for token in range(target.n_vocab):  # every token: ~0.1 s, once per draft model load
        a, b = _text(target, token), _text(draft, token)
        if a != b:
            raise EngineError(f"the draft model's vocabulary differs from the target's "
                              f"(token {token} is {b!r} there, {a!r} here)")


def _text(model: Model, token: int) -> bytes:
    return llama_cpp.llama_vocab_get_text(model.vocab, token) or b""
