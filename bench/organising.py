"""Organising benchmark: `list --tag` and `search --tag` at 100k conversations, the views'
first page in Datasette, and sqlite-utils against the import writer's own inserts.

    python bench/organising.py                                    # 1M messages, 100k conversations
    python bench/organising.py --messages 200000 --conversations 100000   # quicker

Each row is a ratio against a baseline measured in the same run (the same call
without tags; the messages table's first page in the same Datasette), with the
medians and p95 behind it. Goals: list --tag p95 <= 20 ms, search --tag p95 <= 50 ms.
The archive is bench/archive.py's (cached under bench/out/), tagged on a copy.
"""

import argparse
import asyncio
import json
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from chatdb.archive import Archive  # noqa: E402
from chatdb.search.fulltext import search  # noqa: E402
from chatdb.search.index_upkeep import segments  # noqa: E402

import archive as archive_bench  # noqa: E402

SEED = 2712
# A tag's share of the conversations: a label on most of a year, one on a project, a rare one.
TAGS = {"work": 0.10, "rust": 0.05, "rare": 0.01}
PINNED = 0.005
REPEAT = 200

INSERT_TAG = "INSERT INTO tags (id, name, key) VALUES (?, ?, ?)"
INSERT_TAGGED = "INSERT INTO conversation_tags (conversation_id, tag_id) VALUES (?, ?)"
PIN = "UPDATE conversations SET pinned = 1 WHERE id IN (SELECT value FROM json_each(?))"


def tagged_copy(path: Path) -> Path:
    """A copy of the bench archive with TAGS and PINNED given at random (cached beside it)."""
    copy = path.with_name(f"organising-s{SEED}-{path.name}")
    if copy.exists():
        return copy
    partial = copy.with_suffix(".partial")
    shutil.copyfile(path, partial)
    _tag(partial)
    partial.rename(copy)
    return copy


def _tag(copy: Path) -> None:
    rng = np.random.default_rng(SEED)
    with Archive.open(copy) as archive:
        ids = np.array([r[0] for r in archive.conn.execute("SELECT id FROM conversations")])
        with archive.transaction():
            for tag_id, (name, share) in enumerate(TAGS.items(), 1):
                archive.conn.execute(INSERT_TAG, (tag_id, name, name))
                chosen = rng.choice(ids, int(len(ids) * share), replace=False)
                archive.conn.executemany(INSERT_TAGGED, [(int(c), tag_id) for c in chosen])
            pins = rng.choice(ids, int(len(ids) * PINNED), replace=False)
            archive.conn.execute(PIN, (json.dumps([int(p) for p in pins]),))
        archive.conn.execute("ANALYZE")   # as a year-old archive would have been, once


def times(fn, n: int = REPEAT) -> list[float]:
    fn()
    out = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def row(label: str, measured: list[float], baseline: list[float], goal: "float | None" = None):
    med, base = statistics.median(measured), statistics.median(baseline)
    verdict = "" if goal is None else f"  goal p95 <= {goal:g} ms: {'met' if p95(measured) <= goal else 'MISSED'}"
    return (label, f"{med / base:5.2f}x   median {med:7.2f} ms  p95 {p95(measured):7.2f} ms{verdict}")


def listing_rows(archive: Archive) -> list:
    n = archive.count_conversations()
    base = times(lambda: archive.list_conversations(limit=50))
    rows = [(f"baseline: list, first 50 of {n:,} conversations", f"1.00x   median "
             f"{statistics.median(base):7.2f} ms  p95 {p95(base):7.2f} ms")]
    for tags, limit in ((["rare"], -1), (["rare"], 50), (["work"], 50), (["work"], -1),
                        (["work", "rust"], -1)):
        count = len(archive.list_conversations(tags=tags, limit=limit))
        label = (f"list --tag {' --tag '.join(tags)}: {count:,} rows"
                 + (" (the page `list` shows)" if limit > 0 else " (--all)"))
        rows.append(row(label, times(lambda: archive.list_conversations(tags=tags, limit=limit)),
                        base, goal=20))
    rows.append(row("list --pinned", times(lambda: archive.list_conversations(pinned=True)), base))
    return rows


def merged_index_row(archive: Archive) -> tuple:
    """The text index as chatdb keeps it (merged after an import and as chats are written):
    the bulk build leaves it in some 30 segments, each seeked by every statement."""
    before = segments(archive.conn)
    started = time.perf_counter()
    steps = archive.merge_text_index()
    took = time.perf_counter() - started
    return ("text index segments", f"{before} -> {segments(archive.conn)}"
            + (f" (merged in {steps} steps, {took:.1f} s)" if steps else ""))


def search_rows(archive: Archive, queries: list[str]) -> list:
    def run(tags):
        return lambda: [search(archive.conn, q, tags=tags) for q in queries]
    base = [t / len(queries) for t in times(run(()), 5)]
    rows = [(f"baseline: search, {len(queries)} queries, {archive.count_messages():,} messages",
             f"1.00x   median {statistics.median(base):7.2f} ms  p95 {p95(base):7.2f} ms")]
    for tag in ("rare", "rust", "work"):
        each = []
        for q in queries:   # one query at a time, for its p95
            started = time.perf_counter()
            search(archive.conn, q, tags=[tag])
            each.append((time.perf_counter() - started) * 1000)
        rows.append(row(f"search --tag {tag} ({TAGS[tag]:.0%} of conversations)", each, base,
                        goal=50))
    return rows


def datasette_rows(path: Path) -> list:
    """The first page of each view, as Datasette serves it (its own client, no sockets)."""
    from datasette.app import Datasette

    sys.path.insert(0, str(ROOT))
    from cli.browse_metadata import SETTINGS, metadata

    with Archive.open(path) as archive:
        described = metadata(archive.conn, path.stem)
    ds = Datasette([str(path)], metadata=described, settings=SETTINGS)   # as chatdb browse
    name = path.stem

    async def page(url: str) -> float:
        started = time.perf_counter()
        response = await ds.client.get(url)
        assert response.status_code == 200, (url, response.status_code, response.text[:200])
        return (time.perf_counter() - started) * 1000

    async def measure(url: str, n: int = 10) -> list[float]:
        await page(url)
        return [await page(url) for _ in range(n)]

    async def all_rows():
        base = await measure(f"/{name}/messages.json?_size=100")
        rows = [("baseline: Datasette, the messages table's first page (100 rows)",
                 f"1.00x   median {statistics.median(base):7.2f} ms  p95 {p95(base):7.2f} ms")]
        for view, extra in (("chats", ""), ("chat_messages", ""), ("chat_search", "&_search=python"),
                            ("chats", "&_facet=pinned")):
            rows.append(row(f"Datasette /{view}.json first page{' ' + extra[1:] if extra else ''}",
                            await measure(f"/{name}/{view}.json?_size=100{extra}"), base))
        html = await measure(f"/{name}/chats?_size=100", 5)
        rows.append(row("Datasette /chats (the HTML page a person sees)", html, base))
        return rows

    return asyncio.run(all_rows())


def sqlite_utils_rows(n: int = 100_000) -> list:
    """The import writer inserts with executemany in one transaction; sqlite-utils'
    insert_all, the same rows into the same schema, for comparison."""
    import sqlite_utils

    gen = archive_bench.TextGen(SEED)
    texts = gen.messages(n)
    rows = [(i + 1, f"u{i}", None, i + 1, None, 0, "user", text, "complete",
             "2026-01-01T00:00:00.000Z", "{}") for i, text in enumerate(texts)]
    columns = ("id", "uid", "parent_id", "root_id", "conversation_id", "depth", "role", "content",
               "status", "created_at", "meta")
    sql = f"INSERT INTO messages ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"

    def fresh(folder: Path, name: str) -> Path:
        path = folder / name
        Archive.open(path).close()
        return path

    with tempfile.TemporaryDirectory() as tmp:
        own = fresh(Path(tmp), "own.db")
        with Archive.open(own) as archive, archive.transaction():
            started = time.perf_counter()
            archive.conn.executemany(sql, rows)
            mine = time.perf_counter() - started
        theirs_path = fresh(Path(tmp), "theirs.db")
        conn = sqlite3.connect(theirs_path)
        from chatdb import content_hash
        content_hash.register(conn)   # the schema's triggers call it
        db = sqlite_utils.Database(conn, recursive_triggers=False, execute_plugins=False)
        dicts = [dict(zip(columns, r)) for r in rows]
        started = time.perf_counter()
        db["messages"].insert_all(dicts, batch_size=2000)
        theirs = time.perf_counter() - started
        conn.close()
    return [(f"baseline: import writer's executemany, {n:,} messages, one transaction",
             f"1.00x   {n / mine:,.0f} messages/s"),
            ("sqlite-utils insert_all (batch 2000; a commit per batch)",
             f"{theirs / mine:5.2f}x the time   {n / theirs:,.0f} messages/s")]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--conversations", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100, help="search queries per row")
    parser.add_argument("--no-datasette", action="store_true", help="leave out the Datasette rows")
    args = parser.parse_args(argv)
    path, _ = archive_bench.cached_archive(args.messages, args.conversations, 1000)
    queries = archive_bench.search_queries(archive_bench.TextGen(archive_bench.SEED), args.queries)
    copy = tagged_copy(path)
    with Archive.open(copy) as archive:
        rows = [merged_index_row(archive)] + listing_rows(archive) + search_rows(archive, queries)
    if not args.no_datasette:
        rows += datasette_rows(copy)
    rows += sqlite_utils_rows()
    archive_bench.print_table(rows)


if __name__ == "__main__":
    main()
