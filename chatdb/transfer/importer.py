"""Importing a file: recognise its format, then read and write it a conversation at a time.

Formats: chatdb's own export (read_chatdb) and the conversations.json of a
ChatGPT data export (read_chatgpt), bare or inside the export's .zip
(source). The text is read a part at a time (json_stream): memory holds the
conversation being read, never the whole file. Each conversation is checked,
then written (writer), all of them in one transaction: an error anywhere in
the file, found however late, leaves the archive unchanged.
"""

import io
import os

from ..archive import Archive
from .export_json import FORMAT
from .json_stream import BadJSON, JsonStream, NotUTF8, TooLarge
from .read_chatdb import check_version, is_chatdb_export, read_chatdb_conversation
from .read_chatgpt import is_chatgpt_export, read_chatgpt_conversation
from .records import ConversationRecord, ImportFormatError, check_text, fail, get
from .source import Source, SourceError, json_text, size_text
from .writer import ImportReport, import_transaction

# One conversation's text may take at most this share of the machine's memory:
# decoded, it takes about five times that again.
MEMORY_SHARE = 8


def import_source(archive: Archive, source: Source, limit: "int | None" = None) -> ImportReport:
    """Import the JSON text of `source`; errors name `source.name`."""
    report = ImportReport()
    try:
        with import_transaction(archive, report) as writer:
            stream = JsonStream(source.read, memory_limit() if limit is None else limit)
            report.format = read_stream(stream, writer.write)
    except SourceError:
        raise
    except ImportFormatError as exc:
        raise ImportFormatError(f"{source.name}: {exc}" if source.name else str(exc)) from None
    archive.merge_text_index()   # a large import leaves the text index in many segments
    return report


def import_bytes(archive: Archive, data: bytes, source: str) -> ImportReport:
    """Import the file `data` (JSON, or a zip holding it); `source` names it in errors."""
    with json_text(io.BytesIO(data), source) as text:
        return import_source(archive, text)


def read_document(data: bytes) -> tuple[str, list[ConversationRecord]]:
    """(format, records) of a whole file in memory, nothing written."""
    records: list[ConversationRecord] = []
    with json_text(io.BytesIO(data), "") as text:
        return read_stream(JsonStream(text.read), records.append), records


def memory_limit() -> int:
    """The most text of one conversation an import holds on this machine, in bytes."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not reported: assume a small machine
        memory = 2 << 30
    return memory // MEMORY_SHARE


def read_stream(stream: JsonStream, write) -> str:
    """Read the document's conversations, each checked and given to `write`, in order;
    returns its format ("chatdb" or "chatgpt")."""
    try:
        opening = stream.opens()
        if opening == "[":            # ChatGPT's conversations.json
            _conversations(stream, read_chatgpt_conversation, write)
            name = "chatgpt"
        elif opening == "{":
            name = _read_object(stream, write)
        else:
            value = stream.value()
            stream.end()
            raise _neither(value)
        stream.end()
        return name
    except BadJSON as exc:
        raise ImportFormatError(
            f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except NotUTF8 as exc:
        raise ImportFormatError(f"not UTF-8 text (byte {exc.offset})") from None
    except TooLarge as exc:
        raise ImportFormatError(_too_large(exc, "the file's top level")) from None
    except RecursionError:
        raise ImportFormatError("JSON nested too deeply") from None


def _read_object(stream: JsonStream, write) -> str:
    """A top-level object: chatdb's export (its "conversations" streamed), or one
    ChatGPT conversation (read whole: it is one conversation)."""
    header: dict = {}
    streamed, held = False, None
    for key in stream.members():
        if key == "conversations" and stream.opens() == "[" and header.get("format", FORMAT) == FORMAT:
            # An export whose keys were sorted (by jq -S, say) names its format and
            # version after its conversations: those are read on, and the header is
            # checked at the end, before any error they had (all in one transaction).
            known = "format" in header and "version" in header
            if known:
                check_version(header)
            held = _conversations(stream, read_chatdb_conversation, write, hold=not known)
            streamed = True
        else:
            header[key] = stream.value()
    if is_chatdb_export(header):
        check_version(header)
        if held is not None:
            raise held
        if not streamed:
            for number, raw in enumerate(get(header, "conversations", list, ""), 1):
                _write(read_chatdb_conversation(number, raw), write)
        return "chatdb"
    if is_chatgpt_export(header) and not streamed:
        _write(read_chatgpt_conversation(1, header), write)
        return "chatgpt"
    raise _neither(header)


def _conversations(stream: JsonStream, read, write, *, hold: bool = False
                   ) -> "ImportFormatError | None":
    """Each element of the array that comes next, read, checked and written. With
    `hold`, the first error is returned once the array has been read to its end."""
    number, held = 0, None
    try:
        for number, raw in enumerate(stream.elements(), 1):
            if held is None:
                try:
                    _write(read(number, raw), write)
                except ImportFormatError as exc:
                    if not hold:
                        raise
                    held = exc
            del raw   # before the next one is read
    except TooLarge as exc:
        raise ImportFormatError(_too_large(exc, f"conversation {number + 1}")) from None
    return held


def _write(record: ConversationRecord, write) -> None:
    check_text(record)
    write(record)


def _too_large(exc: TooLarge, what: str) -> str:
    return (f"{what} is over {size_text(exc.limit)} of text, more than an import holds at once "
            f"here (1/{MEMORY_SHARE} of this machine's memory)")


def _neither(value) -> ImportFormatError:
    return fail("", "neither a chatdb export nor a ChatGPT conversations.json "
                    f"(the top level is {_kind(value)})")


def _kind(value) -> str:
    if isinstance(value, dict):
        return "an object without \"format\": \"chatdb-export\" or \"mapping\""
    return {str: "a string", int: "a number", float: "a number", bool: "true or false",
            type(None): "null"}.get(type(value), type(value).__name__)
