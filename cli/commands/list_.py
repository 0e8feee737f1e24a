"""`chatdb list`: conversations, pinned first, then the most recently updated."""

from dataclasses import asdict

from chatdb.tags import TagError

from .. import output
from ..options import add_command, open_archive, positive_int
from ..tag_text import tag_list


def register(subparsers) -> None:
    parser = add_command(
        subparsers, "list", run, help="list conversations, pinned first, then most recently updated",
        description="List conversations: pinned ones first, then the most recently updated.\n"
                    "Archived conversations are left out unless --archived is given.\n\n"
                    "JSON: [{id, title, updated_at, message_count, owner, pinned, archived, tags}, ...];\n"
                    "owner: the shared server's user who created it (null: the archive's own)")
    parser.add_argument("--limit", type=positive_int, metavar="N", help="show at most N")
    parser.add_argument("--tag", action="append", default=[], metavar="TAG",
                        help="only those with this tag (repeat it: all must match)")
    parser.add_argument("--pinned", action="store_true", help="only pinned conversations")
    parser.add_argument("--archived", action="store_true", help="only archived conversations")
    parser.add_argument("--user", metavar="NAME", help="only this shared server user's")


def run(args) -> int:
    with open_archive(args) as archive:
        try:
            rows = archive.list_conversations(limit=args.limit or -1, tags=args.tag,
                                              pinned=args.pinned, archived=args.archived,
                                              **({"owner": args.user} if args.user else {}))
        except TagError as exc:
            output.error(str(exc))
            return 2
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
        pin = output.bold("pinned ", color) if row.pinned else ""
        tags = output.dim("  " + tag_list(row.tags), color) if row.tags else ""
        owner = output.dim(f"  [{row.owner}]", color) if row.owner else ""
        output.print_text(f"{row.id:>{width}}  {when}  {row.message_count:>4} msg  {pin}{title}{tags}{owner}")
    return 0
