"""`chatdb fork MESSAGE`: a new conversation continuing from any message."""

from dataclasses import asdict

from .. import output, refs
from ..options import add_command, open_archive

DESCRIPTION = """\
Start a new conversation whose history is MESSAGE and everything before it.
Nothing is copied: both conversations share those messages.

Prints the new conversation's number. JSON: the new conversation
{id, uid, title, head_id, system_prompt, model, created_at, updated_at, meta}."""


def register(subparsers) -> None:
    parser = add_command(subparsers, "fork", run, help="fork a conversation at a message",
                         description=DESCRIPTION)
    parser.add_argument("message", metavar="MESSAGE",
                        help="message number (see `chatdb show`) or uid")
    parser.add_argument("--title", help='title of the new conversation (default: "<title> (fork)")')


def run(args) -> int:
    with open_archive(args) as archive:
        source = refs.message(archive, args.message)
        conv = archive.fork(source.id, title=args.title)
    if args.json:
        output.print_json(asdict(conv))
    else:
        output.print_text(str(conv.id))
    return 0
