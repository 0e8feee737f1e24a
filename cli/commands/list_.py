"""`chatdb list`: conversations, pinned first, then the most recently updated.

A page of them unless asked for more: a year of chats is tens of thousands, and
the newest are what a person looks for (as `gh issue list` pages its 30).
"""

from dataclasses import asdict

from chatdb.tags import TagError

from .. import output
from ..options import add_command, open_archive, positive_int
from ..tag_text import tag_list

PAGE = 50


def register(subparsers) -> None:
    parser = add_command(
        subparsers, "list", run, help="list conversations, pinned first, then most recently updated",
        description="List conversations: pinned ones first, then the most recently updated.\n"
                    "Archived conversations are left out unless --archived is given.\n\n"
                    "JSON: [{id, title, updated_at, message_count, owner, pinned, archived, tags}, ...];\n"
                    "owner: the shared server's user who created it (null: the archive's own)")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--limit", type=positive_int, metavar="N",
                       help=f"show at most N (default {PAGE})")
    shown.add_argument("--all", action="store_true", help="show every one")
    parser.add_argument("--tag", action="append", default=[], metavar="TAG",
                        help="only those with this tag (repeat it: all must match)")
    parser.add_argument("--pinned", action="store_true", help="only pinned conversations")
    parser.add_argument("--archived", action="store_true", help="only archived conversations")
    parser.add_argument("--user", metavar="NAME", help="only this shared server user's")


def run(args) -> int:
    limit = -1 if args.all else args.limit or PAGE
    with open_archive(args) as archive:
        try:   # one more than shown says whether there are more
            rows = archive.list_conversations(limit=-1 if limit < 0 else limit + 1, tags=args.tag,
                                              pinned=args.pinned, archived=args.archived,
                                              **({"owner": args.user} if args.user else {}))
        except TagError as exc:
            output.error(str(exc))
            return 2
    if 0 <= limit < len(rows):
        rows = rows[:limit]
        if args.limit is None:   # the page was not asked for: say it is one
            output.note(f"showing the first {limit}; --limit N or --all shows more")
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
