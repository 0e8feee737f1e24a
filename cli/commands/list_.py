"""`chatdb list`: conversations, most recently updated first."""

from dataclasses import asdict

from .. import output
from ..options import add_command, open_archive, positive_int


def register(subparsers) -> None:
    parser = add_command(
        subparsers, "list", run, help="list conversations, most recently updated first",
        description="List conversations, most recently updated first.\n\n"
                    "JSON: [{id, title, updated_at, message_count}, ...]")
    parser.add_argument("--limit", type=positive_int, metavar="N", help="show at most N")


def run(args) -> int:
    with open_archive(args) as archive:
        rows = archive.list_conversations(limit=args.limit or -1)
    if args.json:
        output.print_json([asdict(row) for row in rows])
        return 0
    color = output.use_color()
    if not rows:
        output.print_text("no conversations")
    width = max((len(str(row.id)) for row in rows), default=1)
    for row in rows:
        when = output.dim(output.minute(row.updated_at), color)
        title = output.one_line(row.title) or "(untitled)"
        output.print_text(f"{row.id:>{width}}  {when}  {row.message_count:>4} msg  {title}")
    return 0
