"""The slash commands: their table, running one, /help, and the closest match to a typo.

Each group module (conversations, tree, search, settings, info) lists its
commands as COMMANDS (command.py).
"""

import difflib

from . import conversations, info, organising, search, settings, tree
from .arguments import UsageError
from .command import Command


KEYS = """\
keys: Enter sends · Alt-Enter (or Esc then Enter) starts a new line · pasted text stays one message
      Ctrl-X Ctrl-E edits the message in $EDITOR · Up/Down and Ctrl-R: input history
      Tab completes commands and their arguments · Ctrl-C stops an answer (keeping it) or
      clears the line · Ctrl-D or /quit leaves once all KV state is stored
A message that starts with / is sent by doubling it: //etc/hosts is sent as /etc/hosts."""


def by_name() -> dict[str, Command]:
    """Every command by name and alias, in /help order (built on first use)."""
    if not _TABLE:
        for group in (conversations, organising, tree, search, settings, info):
            for command in group.COMMANDS:
                _TABLE[command.name] = command
        _TABLE["help"] = Command("help", "[COMMAND]", "this list, or more about one command",
                                 run_help, complete="command")
        for command in list(_TABLE.values()):
            for alias in command.aliases:
                _TABLE.setdefault(alias, command)
    return _TABLE


_TABLE: dict[str, Command] = {}


def names() -> list[str]:
    return [name for name, command in by_name().items() if command.name == name]


def run(session, line: str) -> None:
    """Run `/name args`; unknown names and bad arguments are errors with a hint."""
    word, arg = command_and_argument(line)
    command = by_name().get(word.casefold())
    if command is None:
        raise UsageError(unknown(word))
    try:
        command.run(session, arg)
    except UsageError as exc:
        raise UsageError(f"{exc} (usage: {command.usage})") from None


def command_and_argument(line: str) -> tuple[str, str]:
    parts = line[1:].split(maxsplit=1)
    return (parts[0] if parts else ""), (parts[1].strip() if len(parts) > 1 else "")


def unknown(word: str) -> str:
    guess = closest(word)
    hint = f"did you mean /{guess}? " if guess else ""
    return f"unknown command /{word}; {hint}(/help lists the commands; // sends a message starting with /)"


def closest(word: str) -> "str | None":
    word = word.casefold()
    starting = [name for name in by_name() if name.startswith(word)] if word else []
    if len({by_name()[n].name for n in starting}) == 1:
        return by_name()[starting[0]].name
    found = difflib.get_close_matches(word, list(by_name()), n=1, cutoff=0.5)
    return by_name()[found[0]].name if found else None


def run_help(session, arg: str) -> None:
    r = session.render
    if arg:
        command = by_name().get(arg.lstrip("/").casefold())
        if command is None:
            raise UsageError(unknown(arg.lstrip("/")))
        r.line(r.bold(command.usage) + "  " + command.summary)
        if command.details:
            r.line(command.details)
        return
    width = max(len(by_name()[n].usage) for n in names())
    for name in names():
        command = by_name()[name]
        r.line(f"  {r.bold(command.usage.ljust(width))}  {command.summary}")
    r.line()
    r.line(r.dim(KEYS))
