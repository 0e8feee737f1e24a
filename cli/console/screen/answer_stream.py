"""Streaming an answer to the screen: the engine's on_text and progress callbacks."""

from .render import Renderer, Waiting


class AnswerStream:
    """The engine's on_text: the first piece erases the progress line and sets the colour."""

    def __init__(self, render: Renderer, waiting: Waiting):
        self.render, self.waiting = render, waiting
        self.started = False

    def __call__(self, text: str) -> None:
        if not self.started:
            self._begin()
        self.render.stream(text)

    def progress(self, done: int, total: int) -> None:
        self.waiting.update(f"reading {done:,} of {total:,} tokens")

    def _begin(self) -> None:
        self.started = True
        self.waiting.stop()
        self.render.begin_answer()

    def finish(self, interrupted: bool) -> None:
        if not self.started:
            self._begin()
        self.render.end_answer(interrupted)
