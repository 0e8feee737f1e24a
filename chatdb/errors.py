"""Errors the archive reports to its callers as one clear line."""


class ChatdbError(Exception):
    """An error with a message fit to show the user as is."""


class NotFound(ChatdbError):
    """A conversation or message that does not exist."""


class SearchError(ChatdbError):
    """Arguments no search can honour (a bad date, since after until)."""


class SchemaError(ChatdbError):
    """A database this code must not read or write (newer, changed, corrupt)."""


class BadInput(ChatdbError):
    """What the user gave must change (a file name, a key): the command exits with status 2."""
