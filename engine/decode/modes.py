"""The decode wing's modes: how an answer is drafted, and why it ended.

Kept apart from the code that uses them (and free of llama.cpp) so that
front-ends can name them without loading a model.
"""

from enum import StrEnum


class DraftMode(StrEnum):
    """Speculative decoding as asked for (the first five) and as in force (resolve_mode)."""
    OFF = "off"
    ARCHIVE = "archive"                  # guesses from answers written before (the archive's)
    LOOKUP = "lookup"                    # guesses from earlier text of the conversation
    MODEL = "model"                      # guesses of a draft model
    AUTO = "auto"                        # archive, lookup, and the draft model where one is given
    LOOKUP_THEN_MODEL = "lookup+model"   # in force: lookup, then the draft model when it has none
    ARCHIVE_LOOKUP = "archive+lookup"    # in force: the archive, then lookup
    ARCHIVE_LOOKUP_MODEL = "archive+lookup+model"   # in force: all three, in that order

    @property
    def from_archive(self) -> bool:
        return self in (DraftMode.ARCHIVE, DraftMode.ARCHIVE_LOOKUP, DraftMode.ARCHIVE_LOOKUP_MODEL)

    @property
    def looks_up(self) -> bool:
        return self in (DraftMode.LOOKUP, DraftMode.LOOKUP_THEN_MODEL, DraftMode.ARCHIVE_LOOKUP,
                        DraftMode.ARCHIVE_LOOKUP_MODEL)

    @property
    def uses_model(self) -> bool:
        return self in (DraftMode.MODEL, DraftMode.LOOKUP_THEN_MODEL,
                        DraftMode.ARCHIVE_LOOKUP_MODEL)


ASKED = (DraftMode.AUTO, DraftMode.ARCHIVE, DraftMode.LOOKUP, DraftMode.MODEL,
         DraftMode.OFF)   # --draft's choices


class Finish(StrEnum):
    """Why an answer ended."""
    STOP = "stop"              # an end-of-generation token, a stop string or a turn marker
    LENGTH = "length"          # its max_tokens
    CANCELLED = "cancelled"    # stopped by the user or the client (what was said is kept)
    CONTEXT = "context"        # the context is full
