"""Where the prompt's input history is kept across sessions.

$XDG_STATE_HOME/chatdb/history (~/.local/state/chatdb/history): the XDG
base directory spec puts history in the state directory, apart from the
data (the archive) that one may back up or copy to another machine. It
holds what was typed, so like the archive it is readable by its owner only.
"""

import os
from pathlib import Path


def history_path() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "chatdb" / "history"


def ensure_private(path: Path) -> Path:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o600))
    return path
