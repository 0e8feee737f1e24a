"""`chatdb list`: conversations, most recently updated first."""

from dataclasses import asdict

from .. import output
from ..options import add_command, open_archive, positive_int


def register(subparsers) -> None:
    parser = add_command(
        subparsers, "list", run, help="list conversations, most recently updated first",
        description="List conversations, most recently updated first.\n\n"
                    "JSON: [{id, title, updated_at, message_count, owner}, ...]; owner: the "
                    "shared server's user who created it (null: the archive's own)")
    parser.add_argument("--limit", type=positive_int, metavar="N", help="show at most N")
    parser.add_argument("--user", metavar="NAME", help="only this shared server user's")


def run(args) -> int:
    with open_archive(args) as archive:
        rows = archive.list_conversations(limit=args.limit or -1,
                                          **({"owner": args.user} if args.user else {}))
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
        owner = output.dim(f"  [{row.owner}]", color) if row.owner else ""
        output.print_text(f"{row.id:>{width}}  {when}  {row.message_count:>4} msg  {title}{owner}")
    return 0
