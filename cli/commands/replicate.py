"""`chatdb replicate REPLICA` and `chatdb restore REPLICA FILE`: Litestream's live replica."""

import tempfile
from pathlib import Path

from chatdb.archive import Archive
from chatdb.encryption import cipher
from chatdb.errors import BadInput, ChatdbError
from chatdb.storage import replication, whole_files

from .. import litestream, output
from ..interrupt import quit_on_signals
from ..options import add_command, db_path, open_archive

REPLICATE = """\
Stream the archive to REPLICA with Litestream, until Ctrl-C or SIGTERM:
every transaction any chatdb process commits reaches the replica within
--sync-interval. REPLICA is a directory (made private, mode 0700) or any
replica URL Litestream knows (s3://BUCKET/PATH, gs://, abs://, sftp://, ...;
their credentials come from Litestream's usual environment variables).

While it runs, Litestream alone checkpoints the archive's WAL: chatdb's
processes turn SQLite's automatic checkpoints off and skip their own (a
checkpoint forced behind Litestream's back breaks its place in the log).
A replica directory that disappears is filled again, whole.

An encrypted archive cannot be replicated: Litestream reads SQLite's own
page headers. `chatdb backup` makes encrypted copies to carry elsewhere.

--print-config prints Litestream's configuration instead, for running
`litestream replicate -config FILE` as a service (then set
CHATDB_LITESTREAM=1 for every chatdb process, so that they leave
checkpoints to it)."""

RESTORE = """\
Bring the archive back from a Litestream replica into FILE, a new file:
restored beside it under a temporary name, opened and checked with SQLite's
integrity_check, then renamed. Chats resume from it with their KV state:
`chatdb --db FILE`.

JSON: {path, conversations, messages, integrity_check}"""


def register(subparsers) -> None:
    parser = add_command(subparsers, "replicate", run_replicate,
                         help="stream the archive to a replica with Litestream",
                         description=REPLICATE, json_help=None)
    parser.add_argument("replica", metavar="REPLICA", help="a directory or a replica URL")
    parser.add_argument("--sync-interval", default="1s", metavar="TIME",
                        help="how often changes are sent (Litestream's duration: 1s, 250ms)")
    parser.add_argument("--print-config", action="store_true",
                        help="print Litestream's configuration and exit")
    restore = add_command(subparsers, "restore", run_restore,
                          help="restore the archive from a Litestream replica", description=RESTORE)
    restore.add_argument("replica", metavar="REPLICA", help="a directory or a replica URL")
    restore.add_argument("file", metavar="FILE", type=Path, help="the new archive file")


def run_replicate(args) -> int:
    path = db_path(args)
    if cipher.is_encrypted(path):
        raise BadInput(f"{path}: an encrypted archive cannot be replicated by Litestream (it "
                       "reads SQLite's own pages); `chatdb backup` makes encrypted copies")
    with open_archive(args):   # a chatdb archive, migrated, before Litestream sees it
        pass
    url, directory = litestream.replica_url(args.replica)
    text = litestream.config(path, url, args.sync_interval)
    if args.print_config:
        output.print_text(text.rstrip())
        return 0
    with replication.replicating(path), tempfile.TemporaryDirectory() as scratch:
        config_path = Path(scratch) / "litestream.yml"
        config_path.write_text(text)
        output.note(f"replicating {path} to {url} with Litestream; Ctrl-C stops")
        with quit_on_signals():
            litestream.Replicator(config_path, directory).run()
    return 0


def run_restore(args) -> int:
    destination = args.file.expanduser()
    if destination.exists():
        raise BadInput(f"{destination}: already there; restore into a new file")
    if not destination.parent.is_dir():
        raise BadInput(f"{destination.parent}: no such directory")
    url, _ = litestream.replica_url(args.replica)
    temporary = whole_files.temporary_beside(destination, ".restoring")
    try:
        temporary.unlink()   # Litestream makes the file itself
        litestream.restore(url, temporary)
        with Archive.open(temporary) as archive:
            found = archive.integrity_check()
            if found != "ok":
                raise ChatdbError(f"{url}: the restored archive failed integrity_check ({found})")
            counts = archive.count_conversations(), archive.count_messages()
        whole_files.put_in_place(temporary, destination)
    finally:
        whole_files.remove(temporary)
    if args.json:
        output.print_json({"path": str(destination), "conversations": counts[0],
                           "messages": counts[1], "integrity_check": "ok"})
    else:
        output.print_text(f"restored {url} into {destination}: {counts[0]} conversations, "
                          f"{counts[1]} messages (integrity_check ok)")
    return 0
