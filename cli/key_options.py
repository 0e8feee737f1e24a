"""Where the CLI gets an encrypted archive's key: --key-file, $CHATDB_KEY, or a prompt.

--key-file is read once, before any command runs, and handed to chatdb.encryption.cipher,
which every connection of the process (the console's, the KV writer's, the
server's) then opens an encrypted archive with; $CHATDB_KEY is chatdb's own
default. The prompt is only for a person at a terminal (stdin and stderr both
one): the key is read from the terminal without echo, never from a pipe.
"""

import getpass
import os
import sys

from chatdb.encryption import cipher
from chatdb.errors import BadInput

KEY_FILE_HELP = ("a file holding the key of an encrypted archive (default: $CHATDB_KEY, "
                 "else asked at a terminal)")


def add_key_file_option(parser, default) -> None:
    parser.add_argument("--key-file", metavar="FILE", default=default, help=KEY_FILE_HELP)


def use_key_file(args) -> None:
    """The key in --key-file, if given, for every archive this process opens."""
    path = getattr(args, "key_file", None)
    if path:
        cipher.use(cipher.read_key_file(os.path.expanduser(path)))


def at_a_terminal() -> bool:
    return sys.stdin.isatty() and sys.stderr.isatty()


def ask_key(path) -> bool:
    """Ask for the key of the encrypted archive at `path`; False where no one can answer."""
    if not at_a_terminal():
        return False
    cipher.use(cipher.Key(_read(f"key of {path}: ")))
    return True


def ask_new_key(what: str) -> "cipher.Key":
    """A new passphrase, typed twice alike (at a terminal only)."""
    if not at_a_terminal():
        raise BadInput(f"give the {what} in a file named by --key-file (or $CHATDB_KEY), or run "
                       "this at a terminal to type it")
    first = _read(f"{what}: ")
    if _read(f"{what} again: ") != first:
        raise BadInput("the two passphrases differ; nothing was changed")
    return cipher.Key(first)


def _read(prompt: str) -> str:
    try:
        return getpass.getpass(prompt, stream=sys.stderr)
    except EOFError:
        raise BadInput("no key was typed") from None
