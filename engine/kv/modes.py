"""The KV wing's modes: how a model's KV is stored, and where a turn's KV came from.

Free of llama.cpp, so that front-ends can name them without loading a model.
"""

from enum import StrEnum


class KVMode(StrEnum):
    """How a model's KV is stored in the archive; part of the fingerprint it is stored under."""
    AUTO = "auto"                   # asked for: rows where the layout check passes
    ROWS = "rows"                   # per-message rows
    WINDOW = "rows+window"          # rows, and each message's last window of sliding-window rows
    CHECKPOINT = "rows+checkpoint"  # rows, and a hybrid's recurrent state at messages' ends
    SNAPSHOT = "snapshot"           # whole states at messages' ends

    @property
    def stores_rows(self) -> bool:
        return self in (KVMode.ROWS, KVMode.WINDOW, KVMode.CHECKPOINT)

    @property
    def stored_as(self) -> str:
        """How the mode keeps a conversation's state, in words (chatdb doctor)."""
        return STORED_AS[self]


STORED_AS = {KVMode.ROWS: "rows", KVMode.WINDOW: "rows + window",
             KVMode.CHECKPOINT: "rows + checkpoints", KVMode.SNAPSHOT: "snapshots"}
ROW_MODES = tuple(mode for mode in KVMode if mode.stores_rows)


class KVSource(StrEnum):
    """Where a turn's restored KV came from (what it reports)."""
    LIVE = "live"          # the sequence held it already
    MEMORY = "memory"      # a recently used state kept in memory
    ARCHIVE = "archive"    # stored segments
    NONE = "none"          # nothing restored: the prompt was computed whole
