"""Reading an import file's JSON text, within what memory allows.

An import is parsed whole (it is one transaction, checked before anything
is written), and Python's JSON parser takes about 3x the text in memory,
the records and the text itself about as much again: so the text may take at
most 1/MEMORY_SHARE of the machine's memory. A larger file is refused before
it is read, by its size, or for a zip (a ChatGPT export) by the size its
conversations.json declares; no more than that declared size is ever inflated
(a member whose header lies is refused at its declared size, not at the limit). Zip members are read from the file, never the whole
zip into memory.
"""

import io
import os
import sys
import zipfile
from pathlib import Path

from .records import ImportFormatError

CHATGPT_MEMBER = "conversations.json"  # inside a ChatGPT export .zip
MEMORY_SHARE = 8
ZIP_MAGIC = b"PK\x03\x04"
EMPTY_ZIP_MAGIC = b"PK\x05\x06"


class TooLarge(ImportFormatError):
    """A file whose text would not fit the memory an import may take."""


def memory_limit() -> int:
    """The largest JSON text imported on this machine, in bytes."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not reported: assume a small machine
        memory = 2 << 30
    return memory // MEMORY_SHARE


def read_source(file: str, limit: "int | None" = None) -> tuple[str, bytes]:
    """(the name errors use, the JSON text) of FILE, or of stdin for "-"."""
    limit = memory_limit() if limit is None else limit
    if file == "-":
        data = sys.stdin.buffer.read(limit + 1)
        _check_size("<stdin>", len(data), limit)
        return "<stdin>", json_text(io.BytesIO(data), "<stdin>", limit)
    path = Path(file).expanduser()
    with open(path, "rb") as handle:
        if not _is_zip(handle):
            _check_size(file, os.fstat(handle.fileno()).st_size, limit)
        return file, json_text(handle, file, limit)


def json_text(handle, name: str, limit: int) -> bytes:
    """The file's bytes, or those of the conversations.json inside it if it is a zip."""
    if not _is_zip(handle):
        return handle.read()
    try:
        with zipfile.ZipFile(handle) as archive:
            return _member(archive, name, limit)
    except zipfile.BadZipFile as exc:
        raise ImportFormatError(_at(name, f"a damaged or truncated zip file ({exc})")) from None


def _member(archive: zipfile.ZipFile, name: str, limit: int) -> bytes:
    members = [m for m in archive.infolist() if m.filename.rsplit("/", 1)[-1] == CHATGPT_MEMBER]
    if not members:
        raise ImportFormatError(_at(name, f"a zip file without {CHATGPT_MEMBER}"))
    member = min(members, key=lambda m: len(m.filename))
    where = _at(name, member.filename)
    _check_size(where, member.file_size, limit)
    try:
        with archive.open(member) as stream:
            data = stream.read(member.file_size + 1)   # never more than the zip says it holds
    except (zipfile.BadZipFile, EOFError, OSError) as exc:  # zlib errors are OSError subclasses too
        raise ImportFormatError(f"{where}: damaged inside the zip ({exc})") from None
    if len(data) > member.file_size:
        raise ImportFormatError(f"{where}: damaged inside the zip (it inflates past the "
                                f"{_size(member.file_size)} its header declares)")
    return data


def _at(name: str, text: str) -> str:
    return f"{name}: {text}" if name else text


def _is_zip(handle) -> bool:
    start = handle.tell()
    magic = handle.read(4)
    handle.seek(start)
    return magic in (ZIP_MAGIC, EMPTY_ZIP_MAGIC)


def _check_size(where: str, size: int, limit: int) -> None:
    if size > limit:
        raise TooLarge(
            f"{where} is {_size(size)}; an import may be at most {_size(limit)} here "
            f"(1/{MEMORY_SHARE} of this machine's memory: the whole file is parsed at once, "
            "at about 5x its size); split it into smaller files")


def _size(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"
