"""One slash command: its name, what it takes, what it does, and how Tab completes it.

A command's `run(session, arg)` gets the text after its name (stripped; may
span lines) and raises arguments.UsageError for bad arguments, which the
table (table.py) answers with its usage line.
"""

from dataclasses import dataclass
from typing import Callable


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
