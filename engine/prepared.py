"""A turn's prompt before it runs: the path's tokens fitted to the context, and the answer's opening."""

from dataclasses import dataclass

import numpy as np

from .window import Window


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
