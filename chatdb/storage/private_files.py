"""Files that hold chats are readable by their owner only, whatever the umask.

New files are created 0600 and new directories 0700: os.makedirs would give
the missing parents the umask's default (0777 under umask 000). A file
chatdb writes whole (an export) goes to a temporary file beside it and is
renamed into place, so it is either complete or not there. An existing file
that others may read is tightened when chatdb opens it, and the caller is
told, so that it can say so once.
"""

import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

FILE_MODE = 0o600
DIR_MODE = 0o700
OTHERS = 0o077  # group and world permission bits


@dataclass(frozen=True)
class Tightened:
    """A file whose group and world permissions chatdb took away."""
    path: Path
    old_mode: int

    def __str__(self) -> str:
        return (f"{self.path} could be read by others (mode {self.old_mode:04o}); "
                f"it is now readable by its owner only ({self.old_mode & ~OTHERS:04o})")


def make_dirs(directory: Path) -> None:
    """Create `directory` and any missing parents, each 0700."""
    missing = []
    while not directory.exists() and directory != directory.parent:
        missing.append(directory)
        directory = directory.parent
    for each in reversed(missing):
        try:
            os.mkdir(each, DIR_MODE)
        except FileExistsError:
            pass  # another process made it first


def create(path: Path) -> bool:
    """Create `path` empty and private unless it exists; True if this call created it."""
    if path.exists():  # not even a look at its directory (it may be read-only)
        return False
    make_dirs(path.parent)
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE))
        return True
    except FileExistsError:
        return False


def tighten(*paths: Path) -> list[Tightened]:
    """Take group and world permissions off those of `paths` that have them.

    Files that do not exist, that belong to someone else or that sit on a
    read-only file system are left alone.
    """
    changed = []
    for path in paths:
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
            if mode & OTHERS:
                os.chmod(path, mode & ~OTHERS)
                changed.append(Tightened(Path(path), mode))
        except OSError:  # gone, not ours (EPERM), read-only (EROFS): nothing to do
            continue
    return changed


def write_atomic(path: Path, text: str) -> None:
    """Write all of `text` to `path`, mode 0600, or leave `path` as it was.

    An OSError names `path`, not the temporary file.
    """
    try:
        _write_then_rename(path, text)
    except OSError as exc:
        if exc.errno is None:
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from None


def _write_then_rename(path: Path, text: str) -> None:
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:  # mkstemp: 0600, O_EXCL
            file.write(text)
            file.flush()
            os.fsync(file.fileno())  # whole on disk before it takes the name
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
