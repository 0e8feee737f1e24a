"""`chatdb import FILE`: a chatdb export or a ChatGPT export, all or nothing."""

from dataclasses import asdict

from chatdb.transfer.importer import import_source
from chatdb.transfer.source import open_source

from .. import output
from ..options import add_command, open_archive
from .warm import add_warm_options, summary, warm_conversations

DESCRIPTION = """\
Import conversations from FILE (- for stdin). The format is recognised:
  - chatdb's own JSON export (`chatdb export`);
  - the conversations.json of a ChatGPT data export, or the export's .zip.
Every branch is kept, with titles and times. From ChatGPT, only visible text
from system, user and assistant is kept (tool calls, hidden and image-only
messages are skipped; replies below them move up to the nearest kept one).

The import is one transaction: a file with any error changes nothing, and
the error names what is wrong and where. Conversations and messages already
in the archive (same uid) are skipped, so importing a file twice adds nothing.

With --warm, the KV of every conversation that has none is then computed and
stored (as `chatdb warm` does: the most recently used first, within the
archive's KV budget), so each resumes at once.

JSON: {file, format, conversations, messages, duplicate_conversations,
duplicate_messages, skipped, warm (with --warm: as `chatdb warm --json`)}"""


def register(subparsers) -> None:
    parser = add_command(subparsers, "import", run, help="import a chatdb or ChatGPT export",
                         description=DESCRIPTION)
    parser.add_argument("file", metavar="FILE", help="the file to import, or - for stdin")
    parser.add_argument("--warm", action="store_true",
                        help="then compute and store the KV of conversations that have none")
    add_warm_options(parser)


def run(args) -> int:
    # The file is opened first: one that is missing, or a zip without its
    # conversations.json, leaves no archive behind.
    with open_source(args.file) as source, open_archive(args, create=True) as archive:
        name = source.name
        report = import_source(archive, source)
        warmed = (warm_conversations(archive, [c.id for c in archive.list_conversations()], args)
                  if args.warm else None)
    if args.json:
        output.print_json({"file": name, **asdict(report), **({"warm": warmed} if warmed else {})})
        return 0
    output.print_text(
        f"imported {_count(report.conversations, 'conversation')} and "
        f"{_count(report.messages, 'message')} from {name} ({report.format})")
    if report.duplicate_conversations or report.duplicate_messages:
        output.print_text(
            f"already in the archive: {_count(report.duplicate_conversations, 'conversation')}, "
            f"{_count(report.duplicate_messages, 'message')}")
    if report.skipped:
        output.print_text(f"skipped {_count(report.skipped, 'entry', 'entries')} "
                          "that are not text chatdb keeps (tool calls, hidden or image-only)")
    if warmed:
        output.print_text(summary(warmed))
    return 0


def _count(n: int, one: str, many: "str | None" = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"
