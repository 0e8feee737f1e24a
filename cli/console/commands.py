"""The slash commands: their table, running one, /help, and the closest match to a typo.

Each cmd_* module lists its commands as COMMANDS; a command's `run(session,
arg)` gets the text after its name (stripped; may span lines) and raises
refs.UsageError for bad arguments, which is answered with its usage line.
"""

import difflib
from dataclasses import dataclass
from typing import Callable

from .refs import UsageError


@dataclass(frozen=True)
class Command:
    name: str
    args: str                   # shown after the name: "N|#ID|TITLE", "[FILE]"
    summary: str
    run: Callable
    complete: str = ""          # what Tab completes after the name: see completion.py
    details: str = ""           # more for `/help NAME`
    aliases: tuple = ()

    @property
    def usage(self) -> str:
        return f"/{self.name} {self.args}".rstrip()


KEYS = """\
keys: Enter sends · Alt-Enter (or Esc then Enter) starts a new line · pasted text stays one message
      Ctrl-X Ctrl-E edits the message in $EDITOR · Up/Down and Ctrl-R: input history
      Tab completes commands and their arguments · Ctrl-C stops an answer (keeping it) or
      clears the line · Ctrl-D or /quit leaves once all KV state is stored
A message that starts with / is sent by doubling it: //etc/hosts is sent as /etc/hosts."""


def table() -> dict[str, Command]:
    """Every command by name and alias, in /help order (built on first use)."""
    if not _TABLE:  # imported here: the groups import Command from this module
        from . import cmd_conversations, cmd_info, cmd_search, cmd_settings, cmd_tree
        for group in (cmd_conversations, cmd_tree, cmd_search, cmd_settings, cmd_info):
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
    return [name for name, command in table().items() if command.name == name]


def run(session, line: str) -> None:
    """Run `/name args`; unknown names and bad arguments are errors with a hint."""
    word, arg = split(line)
    command = table().get(word.casefold())
    if command is None:
        raise UsageError(unknown(word))
    try:
        command.run(session, arg)
    except UsageError as exc:
        raise UsageError(f"{exc} (usage: {command.usage})") from None


def split(line: str) -> tuple[str, str]:
    parts = line[1:].split(maxsplit=1)
    return (parts[0] if parts else ""), (parts[1].strip() if len(parts) > 1 else "")


def unknown(word: str) -> str:
    guess = closest(word)
    hint = f"did you mean /{guess}? " if guess else ""
    return f"unknown command /{word}; {hint}(/help lists the commands; // sends a message starting with /)"


def closest(word: str) -> "str | None":
    word = word.casefold()
    starting = [name for name in table() if name.startswith(word)] if word else []
    if len({table()[n].name for n in starting}) == 1:
        return table()[starting[0]].name
    found = difflib.get_close_matches(word, list(table()), n=1, cutoff=0.5)
    return table()[found[0]].name if found else None


def run_help(session, arg: str) -> None:
    r = session.render
    if arg:
        command = table().get(arg.lstrip("/").casefold())
        if command is None:
            raise UsageError(unknown(arg.lstrip("/")))
        r.line(r.bold(command.usage) + "  " + command.summary)
        if command.details:
            r.line(command.details)
        return
    width = max(len(table()[n].usage) for n in names())
    for name in names():
        command = table()[name]
        r.line(f"  {r.bold(command.usage.ljust(width))}  {command.summary}")
    r.line()
    r.line(r.dim(KEYS))
