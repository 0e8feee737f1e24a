"""A turn's prompt before it runs: the path's tokens fitted to the context, and the answer's opening.

The budget is one rule: the path may take the context less the answer's
opening and the room kept for the answer (its max_tokens, at most a quarter
of the context). A question that does not fit with the system prompt is
refused (PromptTooLong); a path that does not fit is windowed (window.py).
A path may also end in a message that is no question (an answer to go on
from, a tool's result): where even the window holding it alone does not fit,
it is refused too, before anything is decoded.
"""

from dataclasses import dataclass

import numpy as np

from ..errors import PromptTooLong
from ..llama.sampling import SamplingSettings
from .path_tokens import PromptBuilder
from .template import TemplateUnstable
from .window import Window, fit_path


@dataclass
class Prepared:
    path: list                # messages, root to the one answered
    opening: list[int]        # the answer's opening (the template's assistant header)
    window: Window            # the path, or the part of it that fits the context
    prompt: np.ndarray        # the window's tokens, then the opening
    key: "str | None"         # what the window's KV is stored under (None: the whole path's)

    @property
    def question_end(self) -> int:
        """Where the path's tokens end and the opening begins."""
        return len(self.prompt) - len(self.opening)


def budget(n_ctx: int, settings: SamplingSettings, opening) -> int:
    """Context tokens a path may take before its answer's opening."""
    return n_ctx - min(settings.max_tokens, n_ctx // 4) - len(opening)


def check_question(prompts: PromptBuilder, path, settings: SamplingSettings) -> None:
    """PromptTooLong unless the question at the end of `path` fits with the system prompt."""
    n_ctx = prompts.model.n_ctx
    before, question = prompts.chat(path[:-1]), prompts.chat(path[-1:])[0]
    try:
        question_tokens = prompts.piece_tokens(before, question)
    except TemplateUnstable:
        question_tokens = prompts.model.tokenize(question["content"], special=False)
    system = path[0] if path[0].role == "system" else None
    room = budget(n_ctx, settings, prompts.generation_tokens(path))
    room -= len(prompts.path_tokens([system]).flat()) if system else 0
    if len(question_tokens) > room:
        raise PromptTooLong(
            f"the message is {len(question_tokens)} tokens; with the system prompt it does not "
            f"fit the context of {n_ctx} tokens (room for {room})")


def check_window(prepared: Prepared, n_ctx: int, settings: SamplingSettings) -> None:
    """PromptTooLong where the fitted window is still longer than its room: the last message,
    which the window keeps whatever it leaves out, does not fit. check_question says so
    earlier, and better, for a question; this catches a path ending in anything else."""
    room, held = budget(n_ctx, settings, prepared.opening), prepared.question_end
    if held > room:
        raise PromptTooLong(
            f"the last message ({prepared.path[-1].role}) does not fit the context of {n_ctx} "
            f"tokens: the window holding it is {held} tokens (room for {room})")


def fit_prompt(prompts: PromptBuilder, path, settings: SamplingSettings, fingerprint: str) -> Prepared:
    """The prompt answering the last message of `path`, fitted to the context."""
    opening = prompts.generation_tokens(path)
    window = fit_path(prompts, path, budget(prompts.model.n_ctx, settings, opening))
    prompt = np.concatenate([window.tokens.flat(), np.asarray(opening, np.int32)])
    return Prepared(path, opening, window, prompt, window.key(fingerprint))

