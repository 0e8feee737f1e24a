"""What an archive's KV takes, for `chatdb kv`, `chatdb doctor` and the console's /stats."""

from dataclasses import asdict, dataclass, field
from pathlib import Path

from .budget import Budget

TOTALS = "SELECT bytes, blobs FROM kv_totals WHERE id = 1"
# Segments count for the conversation that wrote their message; a shared run for
# that of the first segment naming it.
MOST_KV = """
SELECT c.id, c.title, sum(s.bytes) AS kv_bytes, sum(s.tokens) AS tokens FROM (
    SELECT m.conversation_id AS conv, length(k.data) AS bytes, k.n_tokens AS tokens
    FROM kv_segments k JOIN messages m ON m.id = k.message_id
    UNION ALL
    SELECT (SELECT m.conversation_id FROM kv_segments k JOIN messages m ON m.id = k.message_id
            WHERE k.shared_id = r.id ORDER BY k.message_id LIMIT 1), length(r.data), 0
    FROM kv_shared_rows r
) s JOIN conversations c ON c.id = s.conv
GROUP BY c.id ORDER BY kv_bytes DESC, c.id LIMIT ?"""
TEXT_BYTES = "SELECT coalesce(sum(length(CAST(content AS BLOB))), 0) FROM messages"
TOKEN_BYTES = "SELECT coalesce(sum(length(tokens)), 0) FROM message_tokens"
LATELY = 100   # reopenings the hit rate is taken over
REOPENED = """
SELECT count(*), coalesce(sum(restored_tokens > 0), 0), coalesce(sum(restored_tokens), 0),
       coalesce(sum(reusable_tokens), 0)
FROM (SELECT * FROM kv_reopenings ORDER BY id DESC LIMIT ?)"""


@dataclass(frozen=True)
class Reopened:
    turns: int               # the latest turns that reopened a conversation (at most LATELY)
    from_archive: int        # of them, those that restored KV from the archive
    restored_tokens: int
    reusable_tokens: int     # what an archive without a budget would have restored


@dataclass
class KVReport:
    budget_bytes: "int | None"
    budget_source: str
    budget: str              # in words, with where it comes from
    stored_bytes: int        # compressed KV, segments and shared runs
    segments: int
    file_bytes: int          # the archive file and its write-ahead log, on disk
    wal_bytes: int
    free_bytes: int          # pages inside the file that hold nothing
    rest_bytes: int          # all else: text, tokens, the search index, other tables
    text_bytes: int
    token_bytes: int
    conversations: list = field(default_factory=list)   # {id, title, kv_bytes, tokens}, most first
    reopened: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def stored(conn) -> "tuple[int, int]":
    """(bytes of KV stored, blobs holding it): from the running totals, no scan."""
    row = conn.execute(TOTALS).fetchone()
    return (row[0], row[1]) if row else (0, 0)


def reopened(conn, lately: int = LATELY) -> Reopened:
    return Reopened(*conn.execute(REOPENED, (lately,)).fetchone())


def report(archive, budget: Budget, top: int = 10) -> KVReport:
    conn = archive.conn
    kv, blobs = stored(conn)
    page = int(conn.execute("PRAGMA page_size").fetchone()[0])   # SQLCipher's is text
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    free = conn.execute("PRAGMA freelist_count").fetchone()[0] * page
    main, wal = file_sizes(archive.db_path)
    most = [{"id": r[0], "title": r[1], "kv_bytes": r[2], "tokens": r[3]}
            for r in conn.execute(MOST_KV, (top,))]
    return KVReport(
        budget_bytes=budget.bytes, budget_source=budget.source, budget=budget.describe(),
        stored_bytes=kv, segments=blobs, file_bytes=main + wal, wal_bytes=wal, free_bytes=free,
        rest_bytes=max(0, pages * page - kv - free),
        text_bytes=conn.execute(TEXT_BYTES).fetchone()[0],
        token_bytes=conn.execute(TOKEN_BYTES).fetchone()[0],
        conversations=most, reopened=asdict(reopened(conn)))


def file_sizes(path: "Path | None") -> "tuple[int, int]":
    """(the archive file's bytes, its write-ahead log's)."""
    if path is None or str(path) == ":memory:":
        return 0, 0
    path = Path(path)
    sizes = []
    for f in (path, path.with_name(path.name + "-wal")):
        try:
            sizes.append(f.stat().st_size)
        except FileNotFoundError:
            sizes.append(0)
    return sizes[0], sizes[1]
