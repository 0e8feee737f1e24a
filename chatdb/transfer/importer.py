"""Importing a file: recognise its format, read it whole, then write it at once.

(import_source reads a file's JSON text within the memory an import may take.)

Formats: chatdb's own export (import_json) and the conversations.json of a
ChatGPT data export (import_chatgpt), bare or inside the export's .zip.
Nothing is written until the whole file has been read and checked, and the
writing is one transaction: a bad file leaves the archive unchanged.
"""

import io
import json

from ..archive import Archive
from .read_chatdb import is_chatdb_export, read_chatdb_export
from .read_chatgpt import is_chatgpt_export, read_chatgpt_export
from .records import ConversationRecord, ImportFormatError, check_text
from .source import json_text, memory_limit
from .writer import ImportReport, write_records


def import_bytes(archive: Archive, data: bytes, source: str) -> ImportReport:
    """Import the file `data`; `source` names it in error messages."""
    try:
        format_name, records = read_document(data)
        check_text(records)
        return write_records(archive, records, ImportReport(format=format_name))
    except ImportFormatError as exc:
        raise ImportFormatError(f"{source}: {exc}") from None


def read_document(data: bytes) -> tuple[str, list[ConversationRecord]]:
    document = _parse_json(_unzip(data))
    if is_chatdb_export(document):
        return "chatdb", read_chatdb_export(document)
    if is_chatgpt_export(document):
        return "chatgpt", read_chatgpt_export(document)
    raise ImportFormatError(
        "neither a chatdb export nor a ChatGPT conversations.json "
        f"(the top level is {_kind(document)})")


def _unzip(data: bytes) -> bytes:
    """The JSON text: `data`, or the conversations.json inside it."""
    return json_text(io.BytesIO(data), "", memory_limit())


def _parse_json(data: bytes):
    try:
        return json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ImportFormatError(
            f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise ImportFormatError("JSON nested too deeply") from None


def _kind(value) -> str:
    if isinstance(value, dict):
        return "an object without \"format\": \"chatdb-export\" or \"mapping\""
    return {str: "a string", int: "a number", float: "a number", bool: "true or false",
            type(None): "null"}.get(type(value), type(value).__name__)
