"""What every subcommand's parser shares: --db, --json, and opening the archive.

--db belongs to the root parser and to each subcommand's, so that both
`chatdb --db x list` and `chatdb list --db x` work. Its default is
SUPPRESS: a subcommand that was not given --db then keeps the root's value
instead of overwriting it with a default.
"""

import argparse
from pathlib import Path

from chatdb.archive import Archive
from chatdb.encryption import cipher
from chatdb.encryption.unlocking import KeyNeeded
from chatdb.errors import ChatdbError
from chatdb.paths import default_db_path
from chatdb.storage import dbapi

from . import key_options, output
from .key_options import add_key_file_option

DB_HELP = "the archive file (default: $CHATDB_DB, else $XDG_DATA_HOME/chatdb/chatdb.db)"


def db_options() -> argparse.ArgumentParser:
    """A parent parser holding the global options."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--db", metavar="PATH", default=argparse.SUPPRESS, help=DB_HELP)
    add_key_file_option(parent, argparse.SUPPRESS)
    return parent


def add_command(subparsers, name: str, run, *, help: str, description: "str | None" = None,
                json_help: "str | None" = "print one JSON document instead of text"
                ) -> argparse.ArgumentParser:
    """A subcommand parser with the global options; `run(args) -> int` runs it."""
    parser = subparsers.add_parser(name, help=help, description=description or help,
                                   parents=[db_options()],
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    if json_help:
        parser.add_argument("--json", action="store_true", help=json_help)
    parser.set_defaults(func=run)
    return parser


def db_path(args: argparse.Namespace) -> Path:
    db = getattr(args, "db", None)
    return Path(db).expanduser() if db else default_db_path()


def open_archive(args: argparse.Namespace, *, create: bool = False,
                 ask_key: bool = True) -> Archive:
    """The archive --db names. Only commands that write something of their own (chat, ask,
    import, doctor) make a new one: reading a path that is not there (a typo in --db) says
    so rather than leaving an empty archive, and its directories, behind. An encrypted one
    without a key given asks for it at a terminal, unless `ask_key` is False."""
    path = db_path(args)
    if not create and str(path) != ":memory:" and not path.exists():
        raise ChatdbError(f"{path}: no archive there (chatdb makes one when you first chat, "
                          "ask or import)")
    try:
        archive = _open(path, ask_key)
    except dbapi.Error as exc:  # e.g. a directory, or no permission
        raise ChatdbError(f"{path}: {exc}") from None
    if archive.tightened:  # the file first; its -wal and -shm follow its mode
        output.warning(str(archive.tightened[0]))  # once: the next open finds it private
    for note in archive.notes:   # once: the next open finds it converted
        output.warning(note)
    try:
        archive.kv_budget.get()   # a bad $CHATDB_KV_BUDGET is refused before any work
    except ChatdbError:
        archive.close()
        raise
    return archive


def _open(path: Path, ask_key: bool) -> Archive:
    try:
        return Archive.open(path)
    except KeyNeeded:
        if cipher.current() is not None or not ask_key or not key_options.ask_key(path):
            raise
    return Archive.open(path)


# SQLite's INTEGER: every count and id chatdb binds into a query must fit it
MAX_INTEGER = 2**63 - 1


def positive_int(text: str) -> int:
    """An argparse type: 1, 2, 3... up to what SQLite can hold."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_INTEGER:
        raise argparse.ArgumentTypeError(
            f"expected a whole number from 1 to {MAX_INTEGER}, got {text!r}")
    return value


def context_size(text: str) -> int:
    """An argparse type for --ctx: a whole number no smaller than the engine's floor (a
    smaller one is refused, not silently raised)."""
    from engine.machine.offload_plan import MIN_CTX  # loads llama.cpp: only when --ctx is given
    value = positive_int(text)
    if value < MIN_CTX:
        raise argparse.ArgumentTypeError(f"the context must be at least {MIN_CTX} tokens, got {value}")
    return value
