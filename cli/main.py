"""The `chatdb` command: global options, the subcommand table, exit codes.

Exit status: 0 done, 1 error (one line on stderr), 2 usage error, 130
interrupted (Ctrl-C), 141 output pipe closed.
"""

import argparse
import os
import sys
from importlib import metadata

from chatdb.errors import BadInput, ChatdbError
from chatdb.storage import dbapi
from chatdb.storage.connection import describe

from . import output
from .interrupt import Quit
from .text_input import check_arguments

DESCRIPTION = """\
A chat for local language models whose whole memory is one SQLite file.
Without a command, `chatdb` opens the console (see `chatdb chat --help`);
`chatdb COMMAND --help` tells more about each command below."""


# The commands (and what they import: numpy, the archive) are imported inside main(), where
# a Ctrl-C during start-up is exit 130 like any other, not a traceback from an import.


def build_parser() -> argparse.ArgumentParser:
    from .commands import register_all
    from .console import command as console
    from .options import db_options

    parser = argparse.ArgumentParser(prog="chatdb", description=DESCRIPTION,
                                     parents=[db_options(), console.console_options()])
    parser.add_argument("--version", action="version", version=f"chatdb {_version()}")
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    console.register(subparsers)   # first: the default command
    register_all(subparsers)
    return parser


def default_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """A bare `chatdb` (options only) opens the console, as `chatdb chat` does."""
    from .console import command as console

    args.conv = None
    return console.run(args)


def main(argv: "list[str] | None" = None) -> int:
    args = None
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        from .key_options import use_key_file
        from .model_options import fill_defaults
        use_key_file(args)
        fill_defaults(args)
        check_arguments(args)
        run = getattr(args, "func", None)
        return run(args) if run else default_command(args, parser)
    except KeyboardInterrupt:
        return 130
    except Quit as stop:  # SIGTERM or SIGHUP outside an answer, once cleaned up
        return stop.status
    except BrokenPipeError:
        _silence_stdout()
        return 141
    except BadInput as exc:
        output.error(str(exc))
        return 2
    except ChatdbError as exc:
        output.error(str(exc))
    except OSError as exc:  # a file that cannot be read or written
        output.error(_describe_os_error(exc))
    except dbapi.Error as exc:  # e.g. a write to a read-only archive
        path = _db_path(args) if args is not None else None
        output.error(f"{path or 'database'}: {describe(exc, path)}")
    return 1


def _db_path(args):
    from .options import db_path
    return db_path(args)


def _describe_os_error(exc: OSError) -> str:
    if exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    return str(exc)


def _silence_stdout() -> None:
    """The reader went away (`chatdb list | head`): drop what is still buffered."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _version() -> str:
    try:
        return metadata.version("chatdb")
    except metadata.PackageNotFoundError:  # run from a source tree
        return "(not installed)"


if __name__ == "__main__":
    sys.exit(main())
