"""An import file's JSON text as a stream: a file, stdin, or the
conversations.json inside a ChatGPT export's .zip.

Nothing here reads the text whole: the import reads it a part at a time. A
zip member is inflated from the file as it is read, never the whole zip into
memory, and never past the size its header declares (a member whose header
lies is refused there). A zip needs seeking, so one piped to stdin is first
copied to a temporary file (compressed, as it came).
"""

import shutil
import sys
import tempfile
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from .records import ImportFormatError

CHATGPT_MEMBER = "conversations.json"  # inside a ChatGPT export .zip
ZIP_MAGIC = b"PK\x03\x04"
EMPTY_ZIP_MAGIC = b"PK\x05\x06"


class SourceError(ImportFormatError):
    """A file that cannot be read as it claims to be: the message names it."""


@dataclass
class Source:
    name: str                          # how errors name it ("" for data without a name)
    read: Callable[[int], bytes]       # read(n): up to n bytes of JSON text, b"" at its end


@contextmanager
def open_source(file: str) -> Iterator[Source]:
    """The JSON text of FILE (stdin for "-"), or of the conversations.json in it if it is a zip."""
    if file == "-":
        with json_text(sys.stdin.buffer, "<stdin>") as source:
            yield source
        return
    with open(Path(file).expanduser(), "rb") as handle, json_text(handle, file) as source:
        yield source


@contextmanager
def json_text(handle, name: str) -> Iterator[Source]:
    """The handle's bytes, or those of the conversations.json inside it if it is a zip."""
    start = handle.read(4)
    if start not in (ZIP_MAGIC, EMPTY_ZIP_MAGIC):
        yield Source(name, _after(start, handle.read))
        return
    if handle.seekable():
        handle.seek(handle.tell() - len(start))
        with _zip_member(handle, name) as source:
            yield source
        return
    with tempfile.TemporaryFile() as copy:   # a zip piped in: zipfile reads its end first
        copy.write(start)
        shutil.copyfileobj(handle, copy)
        copy.seek(0)
        with _zip_member(copy, name) as source:
            yield source


def _after(start: bytes, read):
    """read(n), with `start` (bytes already read) given back first."""
    pending = [start] if start else []

    def read_on(n: int) -> bytes:
        if pending:
            return pending.pop() + read(max(0, n - len(start)))
        return read(n)
    return read_on


@contextmanager
def _zip_member(handle, name: str) -> Iterator[Source]:
    try:
        archive = zipfile.ZipFile(handle)
    except zipfile.BadZipFile as exc:
        raise SourceError(_at(name, f"a damaged or truncated zip file ({exc})")) from None
    with archive:
        members = [m for m in archive.infolist()
                   if m.filename.rsplit("/", 1)[-1] == CHATGPT_MEMBER]
        if not members:
            raise SourceError(_at(name, f"a zip file without {CHATGPT_MEMBER}"))
        member = min(members, key=lambda m: len(m.filename))
        where = _at(name, member.filename)
        try:
            stream = archive.open(member)
        except (zipfile.BadZipFile, EOFError, OSError) as exc:
            raise SourceError(f"{where}: damaged inside the zip ({exc})") from None
        with stream:
            yield Source(name, _Inflating(stream, where, member.file_size).read)


class _Inflating:
    """A zip member read as it inflates, no further than the size its header declares."""

    def __init__(self, stream, where: str, declared: int):
        self.stream, self.where, self.declared = stream, where, declared
        self.inflated = 0

    def read(self, n: int) -> bytes:
        try:
            # One byte past what is left finds a member that goes on past its size.
            data = self.stream.read(min(n, self.declared - self.inflated + 1))
        except (zipfile.BadZipFile, EOFError, OSError) as exc:  # zlib errors are OSErrors too
            raise SourceError(f"{self.where}: damaged inside the zip ({exc})") from None
        self.inflated += len(data)
        if self.inflated > self.declared:
            raise SourceError(f"{self.where}: damaged inside the zip (it inflates past the "
                              f"{size_text(self.declared)} its header declares)")
        return data


def _at(name: str, text: str) -> str:
    return f"{name}: {text}" if name else text


def size_text(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"
