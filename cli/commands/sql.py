"""`chatdb sql "SELECT ..."`: read the archive with SQL, as a table, JSON, CSV or JSON lines."""

import csv
import sqlite3
import sys

from chatdb.storage.read_only import ReadOnlyRefusal, connect_read_only, execute

from .. import output
from ..options import add_command, db_path, open_archive

CELL_WIDTH = 60   # characters of a value in the table (the whole of it with --json or --csv)

DESCRIPTION = """\
Run one SQL statement on the archive and print its rows: as a table, or with
--json (an array of objects), --nl (one JSON object a line) or --csv. The
archive is opened read-only: a write, a schema change, ATTACH, a PRAGMA that
sets something, or load_extension() is refused in one line (exit 2), as is a
query that is not valid SQL.

Made for people (and always current): the views `chats` (a conversation a
row), `chat_messages` (a message a row, with its place on the path and its
branch) and `chat_search` (with the full-text index messages_fts). See
docs/organising.md.

  chatdb sql "SELECT id, title, tags FROM chats WHERE pinned ORDER BY updated DESC"
  chatdb sql --csv "SELECT * FROM chat_messages WHERE conversation = 12" > chat12.csv
  chatdb sql --json "SELECT title, count(*) AS n FROM chat_messages GROUP BY title"

In the table, a value is shown on one line, cut at 60 characters, and a BLOB
as its size; --json gives a BLOB as {"$base64": true, "encoded": ...}."""


def register(subparsers) -> None:
    parser = add_command(subparsers, "sql", run, help="read the archive with SQL (read-only)",
                         description=DESCRIPTION, json_help="print an array of JSON objects")
    parser.add_argument("query", metavar="SQL", help="one SQL statement")
    parser.add_argument("-p", "--param", nargs=2, action="append", default=[],
                        metavar=("NAME", "VALUE"), help="bind :NAME to VALUE (repeatable)")
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument("--csv", action="store_true", help="comma-separated, with a header row")
    shape.add_argument("--nl", action="store_true", help="one JSON object a line")


def run(args) -> int:
    if args.json and (args.csv or args.nl):
        output.error("give one of --json, --nl and --csv")
        return 2
    open_archive(args).close()   # a chatdb archive, migrated: the views are there
    conn = connect_read_only(db_path(args))
    try:
        try:
            cursor = execute(conn, args.query, dict(args.param))
        except ReadOnlyRefusal as exc:
            output.error(str(exc))
            return 2
        _write(cursor, args)
    finally:
        conn.close()
    return 0


def _write(cursor: sqlite3.Cursor, args) -> None:
    from sqlite_utils.cli import output_rows   # the JSON writer of sqlite-utils' own `query`

    headers = [column[0] for column in cursor.description or ()]
    if args.json or args.nl:
        for line in output_rows(cursor, headers, args.nl, False, False):
            output.print_text(line)
    elif args.csv:
        writer = csv.writer(sys.stdout)
        writer.writerow(headers)
        for row in cursor:
            writer.writerow([_blob(v) if isinstance(v, bytes) else v for v in row])
    else:
        _table(cursor, headers)


def _table(cursor: sqlite3.Cursor, headers: list[str]) -> None:
    import tabulate   # what sqlite-utils' `query --table` prints with

    rows = [[_cell(v) for v in row] for row in cursor]
    if not headers:
        return
    output.print_text(tabulate.tabulate(rows, headers=headers, tablefmt="simple",
                                        disable_numparse=True))


def _cell(value):
    if isinstance(value, bytes):
        return _blob(value)
    if isinstance(value, str):
        return output.shorten(value, CELL_WIDTH)
    return value


def _blob(value: bytes) -> str:
    return f"<BLOB {len(value):,} bytes>"
