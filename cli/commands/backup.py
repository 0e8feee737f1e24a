"""`chatdb backup FILE`: a consistent copy of the archive while it is in use."""

from pathlib import Path

from chatdb.kv.budget import format_size
from chatdb.storage.backup import backup

from .. import output
from ..options import add_command, open_archive

DESCRIPTION = """\
Copy the archive to FILE while other chatdb processes go on using it: the
copy is the archive as it was when the backup began (SQLite's online backup
API), checked with SQLite's integrity_check, and written under a temporary
name beside FILE, then renamed: FILE is always a whole archive, the one it
held before or the new copy. An encrypted archive's copy is encrypted with
the same key. --no-kv leaves out the model's KV state: a small copy of the
text alone (chats then resume by reading their history again).

To restore, open the copy: `chatdb --db FILE`, or move it into the
archive's place while no chatdb runs.

JSON: {path, bytes, seconds, kv, encrypted, integrity_check}"""


def register(subparsers) -> None:
    parser = add_command(subparsers, "backup", run, help="copy the archive while it is in use",
                         description=DESCRIPTION)
    parser.add_argument("file", metavar="FILE", type=Path, help="where the copy goes")
    parser.add_argument("--no-kv", dest="kv", action="store_false",
                        help="leave out the KV state (the text alone)")


def run(args) -> int:
    with open_archive(args) as archive:
        copied = backup(archive.conn, archive.db_path, args.file.expanduser(), kv=args.kv)
    if args.json:
        output.print_json({"path": str(copied.path), "bytes": copied.bytes,
                           "seconds": round(copied.seconds, 3), "kv": copied.kv,
                           "encrypted": copied.encrypted, "integrity_check": "ok"})
        return 0
    what = "" if copied.kv else " without KV"
    output.print_text(f"backed up {archive.db_path}{what} to {copied.path}: "
                      f"{format_size(copied.bytes)} in {copied.seconds:.1f} s "
                      f"(integrity_check ok{', encrypted' if copied.encrypted else ''})")
    return 0
