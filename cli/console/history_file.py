"""Where the prompt's input history is kept across sessions.

$XDG_STATE_HOME/chatdb/history (~/.local/state/chatdb/history): the XDG
base directory spec puts history in the state directory, apart from the
data (the archive) that one may back up or copy to another machine. It
holds what was typed, so like the archive it is readable by its owner only.
"""

import os
from pathlib import Path

from chatdb.storage import private_files


def history_path() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "chatdb" / "history"


def ensure_private(path: Path, warn) -> Path:
    """Create the history file 0600 (directories 0700), or tighten the one there,
    saying so through `warn(text)`."""
    private_files.create(path)
    for change in private_files.tighten(path):
        warn(str(change))
    return path
