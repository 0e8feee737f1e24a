"""Errors the engine reports as one clear line."""

from chatdb.errors import ChatdbError


class EngineError(ChatdbError):
    """A failure of the model or its configuration, fit to show the user."""


class ModelNotFound(EngineError):
    pass


class PromptTooLong(EngineError):
    pass


class Cancelled(EngineError):
    """Stopped (Ctrl-C) before the answer began: nothing is stored for it.

    `done`: tokens of the prefill that were computed before the stop.
    """

    def __init__(self, done: int = 0):
        super().__init__("stopped before the answer began")
        self.done = done
