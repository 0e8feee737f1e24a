"""`chatdb show CONV`: one conversation, its current path or every branch."""

from dataclasses import asdict

from .. import output, refs
from ..options import add_command, open_archive

DESCRIPTION = """\
Show a conversation's current path, from the first message to its head.

JSON: {id, uid, title, head_id, system_prompt, model, created_at, updated_at,
meta, messages: [{id, uid, parent_id, conversation_id, depth, role, content,
status, created_at, meta}, ...]}"""


def register(subparsers) -> None:
    parser = add_command(subparsers, "show", run, help="show a conversation",
                         description=DESCRIPTION)
    parser.add_argument("conv", metavar="CONV", help="conversation number or uid")
    parser.add_argument("--all", action="store_true",
                        help="every branch (all messages the conversation reaches), by depth")


def run(args) -> int:
    with open_archive(args) as archive:
        conv = refs.conversation(archive, args.conv)
        messages = archive.tree(conv.id) if args.all else archive.messages(conv.id)
    if args.json:
        output.print_json({**asdict(conv), "messages": [asdict(m) for m in messages]})
        return 0
    color = output.use_color()
    output.print_text(output.bold(f"{conv.id}  {output.one_line(conv.title) or '(untitled)'}",
                                  color))
    for m in messages:
        output.print_text()
        about = f"[{m.id}] {m.role} · {output.minute(m.created_at)}"
        if args.all and m.parent_id is not None:
            about += f" · reply to {m.parent_id}"
        if args.all and m.id == conv.head_id:
            about += " · head"
        if m.status != "complete":
            about += f" · {m.status}"
        output.print_text(output.dim(about, color))
        output.print_text(output.safe(m.content))
    return 0
