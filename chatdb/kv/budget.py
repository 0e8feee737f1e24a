"""The KV budget: how many bytes of KV state an archive keeps.

It is stored in the archive (settings 'kv_budget'), so that every process on
it, the console, `ask` and `chatdb serve` alike, keeps the same; the
environment's CHATDB_KV_BUDGET overrides it for one process. Unset, the
budget is 4 GiB, or a tenth of the disk the archive is on where that is
less: a chat's KV is thousands of times its text, and a year of daily chats
would otherwise fill a laptop's disk.
"""

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..errors import ChatdbError

ENV = "CHATDB_KV_BUDGET"
KEY = "kv_budget"
UNLIMITED = "unlimited"
DEFAULT_CAP = 4 << 30
DISK_SHARE = 10            # the default is at most 1/DISK_SHARE of the disk
DEFAULT_RULE = "the default: 4 GiB, or a tenth of the disk the archive is on where that is less"

# Decimal units as disks are sold (500MB, 4GB), binary ones as memory is (4GiB);
# a bare letter is binary, as `du -h` and `ls -h` write it.
UNITS = {"": 1, "b": 1,
         "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
         "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40,
         "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)")
EXAMPLES = "a size such as 500MB, 4GiB, 0 or unlimited"


def parse_size(text: str) -> "int | None":
    """Bytes written as `text` (500MB, 4GiB, 1.5G, 0); None for unlimited; ChatdbError
    saying what a size is for anything else."""
    words = text.strip().lower()
    if words == UNLIMITED:
        return None
    match = SIZE.fullmatch(words)
    if match is None or match[2] not in UNITS:
        raise ChatdbError(f"not a size: {text!r} (expected {EXAMPLES})")
    return int(float(match[1]) * UNITS[match[2]])


def format_size(n: "int | None") -> str:
    """1,234 bytes, 12.3 MiB, 4.0 GiB; unlimited for None."""
    if n is None:
        return UNLIMITED
    if n < 1024:
        return f"{n:,} bytes"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            return f"{n:,.1f} {unit}"
    return ""


@dataclass(frozen=True)
class Budget:
    bytes: "int | None"    # None: unlimited
    source: str            # "archive" (set with `chatdb kv budget`), "default", or ENV

    def room(self, stored: int) -> "int | None":
        """Bytes still free under the budget (negative: over it); None if unlimited."""
        return None if self.bytes is None else self.bytes - stored

    def describe(self) -> str:
        """`4.0 GiB (the default: ...)`, `500.0 MiB (set in the archive)`."""
        why = {"archive": "set in the archive", "default": DEFAULT_RULE,
               ENV: f"from ${ENV}"}[self.source]
        return f"{format_size(self.bytes)} ({why})"


def default_budget(db_path: "Path | None") -> int:
    """4 GiB, or a tenth of the disk holding `db_path` where that is less."""
    try:
        where = Path(db_path).resolve().parent if db_path and str(db_path) != ":memory:" else None
        disk = shutil.disk_usage(where).total if where is not None else None
    except OSError:
        disk = None
    return min(DEFAULT_CAP, disk // DISK_SHARE) if disk else DEFAULT_CAP


class KVBudget:
    """The budget of one archive (its settings), as this process sees it."""

    def __init__(self, settings, db_path: "Path | None"):
        self.settings, self.db_path = settings, db_path

    def get(self) -> Budget:
        """The budget in force: $CHATDB_KV_BUDGET, else the archive's, else the default."""
        env = os.environ.get(ENV)
        if env:
            try:
                return Budget(parse_size(env), ENV)
            except ChatdbError as exc:
                raise ChatdbError(f"${ENV}: {exc}") from None
        stored = self.settings.get(KEY)
        if stored is not None:
            return Budget(None if stored == UNLIMITED else int(stored), "archive")
        return Budget(default_budget(self.db_path), "default")

    def set(self, n: "int | None") -> None:
        """Keep at most `n` bytes of KV (None: no limit); inside the caller's transaction."""
        if n is not None and n < 0:
            raise ChatdbError("a KV budget cannot be negative")
        self.settings.put(KEY, UNLIMITED if n is None else str(n))
