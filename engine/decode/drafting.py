"""Which drafter guesses the next tokens: --draft off|lookup|model|auto."""

from ..errors import EngineError
from .lookup import LookupDrafter
from .modes import ASKED, DraftMode


def resolve_mode(mode: "str | DraftMode", has_draft_model: bool,
                 cuts_back: bool = True) -> DraftMode:
    """The mode in force: auto is lookup, then the draft model when lookup has no guess.

    `cuts_back`: whether the model's memory can drop rejected guesses; a recurrent
    state cannot (it would go on from tokens the answer does not have): auto is off.
    """
    if mode not in ASKED:
        raise EngineError(f"unknown draft mode {mode!r} (expected one of {', '.join(ASKED)})")
    mode = DraftMode(mode)
    if mode == DraftMode.MODEL and not has_draft_model:
        raise EngineError("--draft model needs a draft model: pass --draft-model PATH")
    if not cuts_back and mode != DraftMode.OFF:
        if mode != DraftMode.AUTO:
            raise EngineError(f"--draft {mode} needs a model whose memory can drop rejected "
                              f"guesses; this one has recurrent layers")
        return DraftMode.OFF
    if mode == DraftMode.AUTO:
        return DraftMode.LOOKUP_THEN_MODEL if has_draft_model else DraftMode.LOOKUP
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


def make_drafter(mode: DraftMode, prompt: list[int], draft_model=None):
    """A drafter for one answer, or None for plain decoding."""
    drafters = []
    if mode.looks_up:
        drafters.append(LookupDrafter(prompt))
    if mode.uses_model:
        drafters.append(draft_model)
    if not drafters:
        return None
    return drafters[0] if len(drafters) == 1 else FirstGuess(*drafters)
