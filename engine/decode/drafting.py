"""Which drafter guesses the next tokens: --draft off|lookup|model|auto."""

from ..errors import EngineError
from .lookup import LookupDrafter

MODES = ("off", "lookup", "model", "auto")


def resolve_mode(mode: str, has_draft_model: bool, cuts_back: bool = True) -> str:
    """The mode in force: auto is lookup, then the draft model when lookup has no guess.

    `cuts_back`: whether the model's memory can drop rejected guesses; a recurrent
    state cannot (it would go on from tokens the answer does not have): auto is off.
    """
    if mode not in MODES:
        raise EngineError(f"unknown draft mode {mode!r} (expected one of {', '.join(MODES)})")
    if mode == "model" and not has_draft_model:
        raise EngineError("--draft model needs a draft model: pass --draft-model PATH")
    if not cuts_back and mode != "off":
        if mode != "auto":
            raise EngineError(f"--draft {mode} needs a model whose memory can drop rejected "
                              f"guesses; this one has recurrent layers")
        return "off"
    if mode == "auto":
        return "lookup+model" if has_draft_model else "lookup"
    return mode


class FirstGuess:
    """Ask each drafter in turn; the first with a guess wins."""

    def __init__(self, *drafters):
        self.drafters = drafters

    def propose(self, context: list[int], k: int) -> list[int]:
        for drafter in self.drafters:
            guess = drafter.propose(context, k)
            if guess:
                return guess
        return []


def make_drafter(mode: str, prompt: list[int], draft_model=None):
    """A drafter for one answer, or None for plain decoding."""
    if mode == "off":
        return None
    drafters = []
    if "lookup" in mode:
        drafters.append(LookupDrafter(prompt))
    if "model" in mode:
        drafters.append(draft_model)
    return drafters[0] if len(drafters) == 1 else FirstGuess(*drafters)
