"""The subcommand table.

The console's own command, `chatdb chat`, is cli/console/command.py (main.py
registers it first). Each module here exposes `register(subparsers)`, which adds its parser(s)
with options.add_command() and sets `func=run`, where `run(args) -> int` is
the exit status. To add a subcommand, write its module and list it below.
"""

from . import ask, doctor, export, fork, import_, index, kv, list_, manage, search, serve, show, warm
from . import browse, sql, tags
from . import backup, encryption, replicate

MODULES = (ask, list_, show, search, index, fork, manage, export, import_, doctor, serve, warm, kv,
           tags, sql, browse,
           backup, encryption, replicate)


def register_all(subparsers) -> None:
    for module in MODULES:
        module.register(subparsers)
