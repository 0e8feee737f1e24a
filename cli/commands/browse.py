"""`chatdb browse`: the archive, read-only, in Datasette (the optional extra chatdb[browse])."""

import importlib.util
import json
import socket
import tempfile
from pathlib import Path

from chatdb.errors import ChatdbError

from .. import output
from ..browse_metadata import SETTINGS, metadata
from ..interrupt import quit_on_signals
from ..options import add_command, db_path, open_archive

DESCRIPTION = """\
Open the archive in Datasette, read-only, in the browser: the views made for
people (Chats, Messages, Search, with facets and full-text search), the
tables for the machine (tokens, KV state, vectors) hidden. Ctrl-C stops it.

Datasette is an optional extra: pip install 'chatdb[browse]' (or `make
browse`). It names the database after the file: the default archive is
/chatdb, so its chats are at http://127.0.0.1:8001/chatdb/chats."""


def register(subparsers) -> None:
    parser = add_command(subparsers, "browse", run, help="open the archive in Datasette (read-only)",
                         description=DESCRIPTION, json_help=None)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8001, metavar="N",
                        help="port (default 8001; 0 picks a free one)")
    parser.add_argument("-o", "--open", action="store_true", help="open it in the web browser")


def run(args) -> int:
    if importlib.util.find_spec("datasette") is None:
        raise ChatdbError("chatdb browse needs Datasette: pip install 'chatdb[browse]' "
                          "(or `make browse`)")
    if not 0 <= args.port <= 65535:
        output.error(f"--port must be from 0 to 65535, not {args.port}")
        return 2
    _check_free(args.host, args.port)
    path = db_path(args)
    with open_archive(args) as archive:   # a chatdb archive, migrated: the views are there
        described = metadata(archive.conn, path.stem)
    with tempfile.TemporaryDirectory(prefix="chatdb-browse-") as folder:
        described_file = Path(folder) / "metadata.json"
        described_file.write_text(json.dumps(described))
        with quit_on_signals():   # SIGTERM: Datasette stops, then this folder goes (exit 143)
            _serve(_argv(path, described_file, args))
    return 0


def _serve(argv: list[str]) -> None:
    """Datasette's own `serve`, in this process: Ctrl-C and SIGTERM stop its server, and the
    metadata file goes with the folder it is in."""
    from click import ClickException
    from datasette.cli import cli

    try:
        cli.main(args=argv, prog_name="chatdb browse", standalone_mode=False)
    except ClickException as exc:
        raise ChatdbError(f"datasette: {exc.format_message()}") from None
    except SystemExit as exc:   # uvicorn's, when it cannot serve
        if exc.code:
            raise ChatdbError(f"Datasette stopped (status {exc.code}); see its lines above") from None


def _check_free(host: str, port: int) -> None:
    """A port already taken is said in one line, before Datasette starts."""
    if port == 0:
        return
    try:
        with socket.create_server((host, port)):
            pass
    except OSError as exc:
        raise ChatdbError(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None


def _argv(path: Path, described: Path, args) -> list[str]:
    """Datasette opens a file that is not `-i` (immutable) with mode=ro: it reads, and sees
    what chatdb writes meanwhile."""
    settings = [part for name, value in SETTINGS.items()
                for part in ("--setting", name, "on" if value else "off")]
    return ["serve", str(path), "--metadata", str(described), "--host", args.host,
            "--port", str(args.port), *settings, *(["--open"] if args.open else [])]
