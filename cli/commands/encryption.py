"""`chatdb encrypt`, `chatdb decrypt` and `chatdb rekey`: the archive's encryption, in place."""

import os

from chatdb.encryption import cipher
from chatdb.encryption.convert import NOT_ENCRYPTED, convert
from chatdb.errors import BadInput
from chatdb.kv.budget import format_size

from .. import key_options, output
from ..options import add_command, db_path

NEEDS_IT_ALONE = """\
The archive is rewritten into a new file beside it, checked with SQLite's
integrity_check, and renamed into place: a crash or a full disk at any moment
leaves the old file whole (the conversion needs about the archive's size
free). No other chatdb may have the archive open meanwhile (it is refused
if one has)."""

ENCRYPT = f"""\
Encrypt the archive with SQLCipher 4 (AES-256, every page and its WAL). The
passphrase comes from --key-file FILE, else $CHATDB_KEY, else it is asked
twice at the terminal. Afterwards every chatdb command opens the archive
with that key, from the same places; `chatdb serve` from --key-file or
$CHATDB_KEY only. A forgotten passphrase cannot be recovered.

{NEEDS_IT_ALONE}"""

DECRYPT = f"""\
Write the encrypted archive back as a plain SQLite file. Its key comes from
--key-file, $CHATDB_KEY or the terminal.

{NEEDS_IT_ALONE}"""

REKEY = f"""\
Encrypt the archive with a new passphrase. The old one comes from
--key-file, $CHATDB_KEY or the terminal; the new one from --new-key-file,
$CHATDB_NEW_KEY, or twice at the terminal.

{NEEDS_IT_ALONE}"""

NEW_ENV = "CHATDB_NEW_KEY"


def register(subparsers) -> None:
    add_command(subparsers, "encrypt", run_encrypt, help="encrypt the archive in place",
                description=ENCRYPT)
    add_command(subparsers, "decrypt", run_decrypt, help="decrypt the archive in place",
                description=DECRYPT)
    rekey = add_command(subparsers, "rekey", run_rekey,
                        help="encrypt the archive with a new passphrase", description=REKEY)
    rekey.add_argument("--new-key-file", metavar="FILE",
                       help=f"a file holding the new passphrase (default: ${NEW_ENV}, else asked)")


def run_encrypt(args) -> int:
    key = cipher.current() or key_options.ask_new_key("new passphrase")
    return _report(args, convert(db_path(args), None, key), "encrypted")


def run_decrypt(args) -> int:
    return _report(args, convert(db_path(args), _archive_key(args), None), "decrypted")


def run_rekey(args) -> int:
    old = _archive_key(args)
    if old is None:   # said before a new passphrase is asked for
        raise BadInput(NOT_ENCRYPTED.format(db_path(args)))
    if args.new_key_file:
        new = cipher.read_key_file(os.path.expanduser(args.new_key_file))
    elif os.environ.get(NEW_ENV):
        new = cipher.Key(os.environ[NEW_ENV])
    else:
        new = key_options.ask_new_key("new passphrase")
    return _report(args, convert(db_path(args), old, new), "rekeyed")


def _archive_key(args) -> "cipher.Key | None":
    """The key the archive is encrypted with, as every command gets it (None: not encrypted,
    which convert() says)."""
    path = db_path(args)
    if cipher.current() is None and cipher.is_encrypted(path):
        key_options.ask_key(path)
    return cipher.current() if cipher.is_encrypted(path) else None


def _report(args, done, verb: str) -> int:
    if args.json:
        output.print_json({"path": str(done.path), "encrypted": done.encrypted,
                           "bytes": done.bytes, "seconds": round(done.seconds, 3)})
    else:
        output.print_text(f"{verb} {done.path} ({format_size(done.bytes)}) in {done.seconds:.1f} s")
    return 0
