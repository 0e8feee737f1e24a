"""`chatdb export`: conversations as a JSON document or as Markdown."""

import json
import sys
from pathlib import Path

from chatdb.storage import private_files
from chatdb.transfer.export_json import all_conversation_ids, export_document
from chatdb.transfer.export_markdown import markdown_document

from .. import output, refs
from ..options import add_command, open_archive

DESCRIPTION = """\
Export conversations (all of them when none is named).

--format json (the default) writes everything but tokens and KV state, every
branch of every conversation, linked by uids; `chatdb import` reads it back:
  {"format": "chatdb-export", "version": 1, "conversations": [{"uid", "title",
   "created_at", "updated_at", "system_prompt", "model", "meta", "head",
   "messages": [{"uid", "parent", "conversation", "role", "content",
                 "status", "created_at", "meta"}, ...]}, ...]}

--format markdown writes each conversation's current path (root to head) for
reading; several conversations are separated by a horizontal rule (---).

Output goes to stdout unless -o FILE is given (written whole, then renamed
into place, readable by you alone). With -o, --json prints a summary
{path, format, conversations, messages}; without -o, --json is --format json."""


def register(subparsers) -> None:
    parser = add_command(subparsers, "export", run, help="export conversations (JSON or Markdown)",
                         description=DESCRIPTION,
                         json_help="with -o: print a JSON summary; without: same as --format json")
    parser.add_argument("convs", metavar="CONV", nargs="*", help="conversation numbers or uids")
    parser.add_argument("--format", choices=("json", "markdown"), default=None,
                        help="json (default) or markdown")
    parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")


def run(args) -> int:
    if args.json and not args.output and args.format == "markdown":
        output.error("--json without -o prints the JSON export; it cannot be --format markdown")
        return 2
    fmt = args.format or "json"
    with open_archive(args) as archive:
        damage = archive.damage()   # a backup should know whether its archive is whole
        if damage:
            output.warning(f"{archive.db_path}: the archive is damaged (SQLite's quick_check: "
                           f"{damage}); this export holds what can be read, and `chatdb doctor` "
                           "runs integrity_check")
        conv_ids = [refs.conversation(archive, ref).id for ref in args.convs] or None
        if fmt == "json":
            document = export_document(archive, conv_ids)
            text = json.dumps(document, ensure_ascii=False, indent=2) + "\n"
            counts = _counts(document)
        else:
            conv_ids = conv_ids or all_conversation_ids(archive)
            text = markdown_document(archive, conv_ids)
            counts = (len(conv_ids), sum(len(archive.messages(cid)) for cid in conv_ids))
    text, replaced = output.encodable(text)
    if replaced:
        output.warning(f"{replaced} character{'s' * (replaced != 1)} of the archive "
                       f"{'were lone surrogates' if replaced != 1 else 'was a lone surrogate'} "
                       "(not text); written as U+FFFD")
    if not args.output:
        sys.stdout.write(text)
        return 0
    path = Path(args.output).expanduser()
    private_files.write_atomic(path, text)
    _report(args, path, fmt, *counts)
    return 0


def _counts(document: dict) -> tuple[int, int]:
    """Conversations, and distinct messages (forks list shared ones twice)."""
    uids = {m["uid"] for conv in document["conversations"] for m in conv["messages"]}
    return len(document["conversations"]), len(uids)


def _report(args, path: Path, fmt: str, conversations: int, messages: int) -> None:
    if args.json:
        output.print_json({"path": str(path), "format": fmt, "conversations": conversations,
                           "messages": messages})
    else:
        output.print_text(f"exported {conversations} conversation{'s' * (conversations != 1)} "
                          f"({messages} message{'s' * (messages != 1)}) to {path}")
