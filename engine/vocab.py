"""Whether two models share a vocabulary (a draft model must share the target's)."""

import llama_cpp

from .errors import EngineError
from .model import Model

SAMPLES = 2048


def check_same_vocab(target: Model, draft: Model) -> None:
    if target.n_vocab != draft.n_vocab:
        raise EngineError(f"the draft model's vocabulary has {draft.n_vocab} tokens, "
                          f"the target's {target.n_vocab}: they must share one")
    specials = [llama_cpp.llama_vocab_bos(target.vocab), llama_cpp.llama_vocab_eos(target.vocab),
                llama_cpp.llama_vocab_eot(target.vocab)]
    step = max(1, target.n_vocab // SAMPLES)
    for token in [t for t in specials if t >= 0] + list(range(0, target.n_vocab, step)):
        a, b = target.piece(token, special=True), draft.piece(token, special=True)
        if a != b:
            raise EngineError(f"the draft model's vocabulary differs from the target's "
                              f"(token {token} is {b!r} there, {a!r} here)")
