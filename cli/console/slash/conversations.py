"""/new, /list, /switch, /rename, /delete."""

from ... import output
from ...tag_text import tag_list
from ..screen.views import plural, show_recent
from .arguments import UsageError, conversation_id, whole_number
from .command import Command

LIST_DEFAULT = 20


def new(session, arg: str) -> None:
    session.start_new(title=arg, system=session.default_system)
    session.render.note(f"new conversation{f' {arg!r}' if arg else ''}: it is saved with its first message")


def list_(session, arg: str) -> None:
    words = arg.split()
    user = None
    if "--user" in words:   # one shared server user's (chatdb serve --keys)
        at = words.index("--user")
        if at + 1 >= len(words):
            raise UsageError("/list [N] [--user NAME]")
        user, words = words[at + 1], words[:at] + words[at + 2:]
    limit = whole_number(" ".join(words), "N") if words else LIST_DEFAULT
    rows = session.archive.list_conversations(limit=limit, **({"owner": user} if user else {}))
    session.remember_listed([row.id for row in rows])
    r = session.render
    if not rows:
        r.line("no conversations yet")
        return
    id_width = max(len(str(row.id)) for row in rows) + 1
    for n, row in enumerate(rows, 1):
        mark = "*" if row.id == session.conv_id else " "
        title = output.one_line(row.title) or "(untitled)"
        when = r.dim(output.minute(row.updated_at))
        pin = "pinned " if row.pinned else ""
        line = f"{mark}{n:>3}  {'#' + str(row.id):<{id_width}}  {when}  {row.message_count:>4} msg  {pin}{title}"
        tags = r.dim("  " + tag_list(row.tags)) if row.tags else ""
        owner = r.dim(f"  [{row.owner}]") if row.owner else ""
        r.line((r.bold(line) if row.id == session.conv_id else line) + tags + owner)
    total = session.archive.count_conversations()
    if total > len(rows):
        r.note(f"{len(rows)} most recent of {total:,}; /list N shows more")


def switch(session, arg: str) -> None:
    target = conversation_id(session, arg)
    session.switch(target)
    show_recent(session, f"switched to {session.label()}")


def rename(session, arg: str) -> None:
    title = output.one_line(arg)
    if not title:
        raise UsageError("give the new title")
    if session.conv_id is None:
        session.set_pending(title=title)
    else:
        session.archive.rename(session.conv_id, title)
    session.render.note(f"renamed to {title!r}")


def delete(session, arg: str) -> None:
    target = conversation_id(session, arg) if arg else session.conv_id
    if target is None:
        raise UsageError("this conversation is not saved yet: there is nothing to delete")
    conv = session.archive.conversation(target)
    count = len(session.numbered(session.archive.messages(target)))
    question = f"delete #{conv.id} {conv.title or '(untitled)'!r} ({plural(count, 'message')})? [y/N] "
    if not session.frontend.confirm(question):
        session.render.note("not deleted")
        return
    removed = session.archive.delete_conversation(target)
    session.forget(target)
    session.render.note(f"deleted #{conv.id}; {plural(removed, 'message')} removed "
                        f"(messages shared with forks are kept)")
    if target == session.conv_id:
        session.start_new(system=session.default_system)
        session.render.note("you are in a new conversation")


COMMANDS = [
    Command("new", "[TITLE]", "start a new conversation (saved with its first message)", new),
    Command("list", "[N] [--user NAME]", "conversations, pinned first, then most recent, numbered for /switch",
            list_, details="Shows the 20 most recent, or N: pinned ones first, with their tags.\n"
                           "The current one is marked with *; archived ones are left out."),
    Command("switch", "N|#ID|TITLE", "continue another conversation", switch,
            complete="conversation",
            details="N: its number in the last /list. #ID: its id (as `chatdb list` shows).\n"
                    "TITLE: its title, or a part of it that only one title contains.\n"
                    "The model's state is restored from the archive, not re-read."),
    Command("rename", "TITLE", "give this conversation a new title", rename),
    Command("delete", "[N|#ID|TITLE]", "delete this (or that) conversation, after asking", delete,
            complete="conversation",
            details="Messages that forks share stay. Deleting the current conversation\n"
                    "leaves you in a new one."),
]
