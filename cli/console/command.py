"""`chatdb chat [CONV]` (and a bare `chatdb`): the interactive console."""

import argparse

from ..model_options import add_model_options
from ..options import add_command

DESCRIPTION = '''\
Open the console: chat with streamed answers, search every conversation,
fork from any message, and continue any chat with its model state restored
from the archive instead of re-read. A bare `chatdb` does the same in a new
conversation; `chatdb -c` continues the most recently used one.

CONV is a conversation number (as `chatdb list` shows) or uid. Inside, /help
lists the commands.

When stdin is not a terminal, messages are read from it, one per line (a
line """ starts and ends a multi-line message); slash commands work too, and
each answer is printed as it streams:

    printf 'Name three rivers\\n/export rivers.md\\n' | chatdb --max-tokens 100'''


def add_console_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--continue", dest="continue_last", action="store_true",
                        help="continue the most recently used conversation")
    add_model_options(parser)


def console_options() -> argparse.ArgumentParser:
    """The console's options as a parent parser, for the root `chatdb` command."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("console (a bare `chatdb`; see `chatdb chat --help`)")
    add_console_options(group)
    return parent


def register(subparsers) -> None:
    parser = add_command(subparsers, "chat", run, help="open the console (the default command)",
                         description=DESCRIPTION, json_help=None)
    parser.add_argument("conv", metavar="CONV", nargs="?", help="conversation number or uid")
    add_console_options(parser)


def run(args) -> int:
    from .startup import run as run_console

    return run_console(args)
