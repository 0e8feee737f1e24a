"""`chatdb delete CONV` and `chatdb rename CONV TITLE`."""

from dataclasses import asdict

from .. import output, refs
from ..options import add_command, open_archive

DELETE_DESCRIPTION = """\
Delete a conversation, with every message no other conversation reaches
(messages shared with forks stay), and give the space their KV held back to
the disk. There is no confirmation.

JSON: {id, uid, title, messages_removed}"""

RENAME_DESCRIPTION = """\
Give a conversation a new title.

JSON: the conversation {id, uid, title, head_id, ...}"""


def register(subparsers) -> None:
    delete = add_command(subparsers, "delete", run_delete, help="delete a conversation",
                         description=DELETE_DESCRIPTION)
    delete.add_argument("conv", metavar="CONV", help="conversation number or uid")
    rename = add_command(subparsers, "rename", run_rename, help="rename a conversation",
                         description=RENAME_DESCRIPTION)
    rename.add_argument("conv", metavar="CONV", help="conversation number or uid")
    rename.add_argument("title", metavar="TITLE")


def run_delete(args) -> int:
    with open_archive(args) as archive:
        conv = refs.conversation(archive, args.conv)
        removed = archive.delete_conversation(conv.id)
        archive.kv_keeping.give_back()   # the pages its KV held go back to the disk
    if args.json:
        output.print_json({"id": conv.id, "uid": conv.uid, "title": conv.title,
                           "messages_removed": removed})
    else:
        output.print_text(f"deleted conversation {conv.id}; {removed} "
                          f"message{'s' if removed != 1 else ''} removed")
    return 0


def run_rename(args) -> int:
    with open_archive(args) as archive:
        conv = refs.conversation(archive, args.conv)
        archive.rename(conv.id, args.title)
        conv = archive.conversation(conv.id)
    if args.json:
        output.print_json(asdict(conv))
    else:
        output.print_text(f"renamed conversation {conv.id} to {output.one_line(conv.title)!r}")
    return 0
