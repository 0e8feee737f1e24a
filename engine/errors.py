"""Errors the engine reports as one clear line."""

from chatdb.errors import ChatdbError


class EngineError(ChatdbError):
    """A failure of the model or its configuration, fit to show the user."""


class ModelNotFound(EngineError):
    pass


class PromptTooLong(EngineError):
    pass
