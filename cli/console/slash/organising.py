"""/tag, /untag, /tags, /pin, /unpin, /archive, /unarchive: keeping conversations in order."""

import shlex

from chatdb.tags import TagError

from ...tag_text import tag_list
from .arguments import UsageError, conversation_id
from .command import Command


def _current(session) -> int:
    if session.conv_id is None:
        raise UsageError("this conversation is not saved yet: it is, with its first message")
    return session.conv_id


def _tags(arg: str) -> list[str]:
    """The tags of an argument: words, or "quoted words" for a tag with spaces."""
    try:
        tags = shlex.split(arg)
    except ValueError as exc:   # an unclosed quote
        raise UsageError(f"cannot read the tags: {exc}") from None
    if not tags:
        raise UsageError("give one or more tags (\"quote one\" with spaces)")
    return tags


def tag(session, arg: str) -> None:
    _change(session, lambda conv_id, tags: session.archive.tags.add(conv_id, tags), arg)


def untag(session, arg: str) -> None:
    _change(session, lambda conv_id, tags: session.archive.tags.remove(conv_id, tags), arg)


def _change(session, change, arg: str) -> None:
    conv_id = _current(session)
    try:
        tags = change(conv_id, _tags(arg))
    except TagError as exc:
        raise UsageError(str(exc)) from None
    session.render.note(f"tags: {tag_list(tags) if tags else '(none)'}")


def tags_(session, arg: str) -> None:
    r = session.render
    counts = session.archive.tags.counts()
    if not counts:
        r.line("no tags yet (/tag NAME tags this conversation)")
        return
    mine = set(session.archive.tags.of(session.conv_id)) if session.conv_id is not None else set()
    for name, n in counts:
        line = f"{'*' if name in mine else ' '} {n:>5,}  {tag_list([name])}"
        r.line(r.bold(line) if name in mine else line)
    if mine:
        r.note("* this conversation's")


def _flag(flag: str, value: bool, said: str):
    def run(session, arg: str) -> None:
        target = conversation_id(session, arg) if arg else _current(session)
        session.archive.tags.set_flag(target, flag, value)
        session.render.note(f"{said} #{target}")
    return run


COMMANDS = [
    Command("tag", "TAG...", "tag this conversation", tag, complete="tag",
            details='Any number of tags; "quote one" with spaces. Case does not matter:\n'
                    "/list and `chatdb list --tag` find them, and so does tag:NAME in /search."),
    Command("untag", "TAG...", "take tags off this conversation", untag, complete="own_tag"),
    Command("tags", "", "every tag, with how many conversations carry it", tags_),
    Command("pin", "[N|#ID|TITLE]", "pin this (or that) conversation: first in /list",
            _flag("pinned", True, "pinned"), complete="conversation"),
    Command("unpin", "[N|#ID|TITLE]", "unpin this (or that) conversation",
            _flag("pinned", False, "unpinned"), complete="conversation"),
    Command("archive", "[N|#ID|TITLE]", "archive this (or that) conversation: out of /list",
            _flag("archived", True, "archived"), complete="conversation",
            details="`chatdb list --archived` lists them; /switch still finds one by title."),
    Command("unarchive", "[N|#ID|TITLE]", "bring an archived conversation back to /list",
            _flag("archived", False, "unarchived"), complete="conversation"),
]
