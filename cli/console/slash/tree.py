"""/history, /branches, /fork, /edit, /retry, /back: moving about a conversation's tree."""

from ..screen.tree_view import branch_lines, branch_points
from ..screen.views import show_message, show_recent
from .arguments import UsageError, message_number, whole_number
from .command import Command


def history(session, arg: str) -> None:
    r = session.render
    path = session.path()
    if not path:
        r.line("no messages yet")
        return
    numbered = session.numbered(path)
    last = whole_number(arg, "LAST") if arg else len(numbered)
    if path[0].role == "system":
        r.line(r.dim("system prompt: ") + path[0].content)
    unseen = session.left_out()
    if unseen:
        r.note(f"messages 1-{unseen} are no longer in the model's context (it sees "
               f"{unseen + 1}-{len(numbered)}; the system prompt stays)")
    for n, m in list(enumerate(numbered, 1))[-last:]:
        r.line()
        show_message(r, n, m, unseen=n <= unseen)


def branches(session, arg: str) -> None:
    if arg:
        raise UsageError("takes no arguments")
    r = session.render
    conv = session.conversation()
    if conv is None or conv.head_id is None:
        r.line("no messages yet")
        return
    for line, on_path in branch_lines(session.archive.tree(conv.id), session.path(), conv.head_id):
        r.line(r.bold(line) if on_path else line)


def fork(session, arg: str) -> None:
    n, message = message_number(session, arg)
    conv = session.archive.fork(message.id)
    session.switch(conv.id)
    show_recent(session, f"forked at message {n} into {session.label()}")
    if message.role == "user":
        session.render.note("it ends with your message: /retry answers it, or write the next one")


def edit(session, arg: str) -> None:
    number, text = (arg.split(maxsplit=1) + ["", ""])[:2]
    n, message = message_number(session, number, default_last=False)
    if message.role != "user":
        raise UsageError(f"message {n} is the assistant's; only your messages can be edited")
    text = text.strip() or session.frontend.edit_text(message.content)
    if not text or not text.strip():
        session.render.note("not edited")
        return
    if text.strip() == message.content.strip():
        raise UsageError("the text is unchanged; /retry asks for another answer")
    edited = session.archive.add_message(session.conv_id, "user", text, parent_id=message.parent_id)
    session.render.note(f"message {n} rewritten as a new branch (/branches shows both)")
    session.answer(edited.id)


def retry(session, arg: str) -> None:
    if arg:
        raise UsageError("takes no arguments")
    path = session.path()
    if not path or path[-1].role == "system":
        raise UsageError("there is no message to answer yet")
    question = path[-1] if path[-1].role == "user" else session.archive.message(path[-1].parent_id)
    if question.role != "user":
        raise UsageError("the last answer does not follow a message of yours")
    session.answer(question.id)


def back(session, arg: str) -> None:
    if arg:
        raise UsageError("takes no arguments")
    conv = session.conversation()
    path = session.path()
    points = branch_points(session.archive.tree(conv.id), path) if conv else []
    if not points:
        raise UsageError("there is no branch point above the head (/branches shows the tree)")
    point = points[-1]
    session.archive.set_head(conv.id, point.id)
    n = len(session.numbered(session.archive.path(point.id)))
    where = f"message {n}" if n else "the start"
    hint = ("/retry answers it again, or write another message" if point.role == "user"
            else "your next message starts another branch")
    session.render.note(f"head moved back to {where}, where the conversation branches; {hint}")


COMMANDS = [
    Command("history", "[LAST]", "the current path with message numbers (or its LAST messages)",
            history),
    Command("branches", "", "the conversation's tree, the current path marked *", branches),
    Command("fork", "[N]", "a new conversation from message N of this path (default: the last)",
            fork, complete="message",
            details="Nothing is copied: both conversations share the messages up to N,\n"
                    "and their stored KV state, so the fork resumes at once."),
    Command("edit", "N [TEXT]", "rewrite your message N as a new branch and answer it", edit,
            complete="user_message",
            details="Without TEXT, the message is put in the prompt to edit (in the terminal;\n"
                    "Ctrl-X Ctrl-E opens $EDITOR), or read as the next message from stdin.\n"
                    "The old branch is kept (/branches, /back)."),
    Command("retry", "", "a new answer to the last message, as a sibling branch", retry,
            aliases=("regenerate",)),
    Command("back", "", "move the head back to the previous branch point", back,
            details="The previous branch point is the nearest message above the head with\n"
                    "more than one reply (after /retry: your question; after /edit: the\n"
                    "message before the edited one). What you send next branches from there."),
]
