"""Where the archive lives by default (XDG base directories)."""

import os
from pathlib import Path


def data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "chatdb"


def default_db_path() -> Path:
    """CHATDB_DB if set, else $XDG_DATA_HOME/chatdb/chatdb.db."""
    env = os.environ.get("CHATDB_DB")
    return Path(env) if env else data_dir() / "chatdb.db"
