"""Archive benchmark: insert rate, full-text search, listing and path latency.

    python bench/archive.py                      # full size: 1M messages, 100k conversations
    python bench/archive.py --messages 50000 --conversations 5000   # a quick run

The generated archive is cached under bench/out/, keyed by its parameters
and by the code that shapes the index, so a rerun measures without rebuilding.
Prints a plain-text table.
"""

import argparse
import hashlib
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from a checkout, installed or not

from chatdb.search import textindex  # noqa: E402
from chatdb.archive import Archive  # noqa: E402
from chatdb.search.fulltext import search  # noqa: E402

OUT = ROOT / "bench" / "out"
GENERATOR_VERSION = 2  # bump when the generated text changes
SEED = 20261129
DEEP_TITLE = "bench: deep path"
BATCH = 10_000  # messages per bulk transaction

# The most frequent English words head the vocabulary; made-up words follow,
# longer as they get rarer, as in real text.
COMMON = """the of and to a in is it you that was for on are with as i his they be
at one have this from or had by not word but what some we can out other were all
there when up use your how said an each she which do their time if will way about
many then them write would like so these her long make thing see him two has look
more day could go come did number sound no most people my over know water than
call first who may down side been now find any new work part take get place made
live where after back little only round man year came show every good me give our
under name very through just form sentence great think say help low line differ
turn cause much mean before move right boy old too same tell does set three want
air well also play small end put home read hand port large spell add even land
here must big high such follow act why ask men change went light kind off need
house picture try us again animal point mother world near build self earth father
python error file memory model token cache query index thread server client""".split()
SYLLABLES = ("ka ri to mu ne so la vi de po sa ki lo me nu ta ze bo fi ga ru ho "
             "an el in on ur ex al or is at").split()
ACCENTED = str.maketrans("aeiouc", "àéîöüç")
CJK_CHARS = ("的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会"
             "自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手"
             "十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法"
             "此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便"
             "位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先"
             "山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白"
             "应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象")
KANA = ("あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをん"
        "アイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモヤユヨラリルレロワン")


class TextGen:
    """Chat-like text: words drawn with Zipf frequencies, a few messages in CJK."""

    def __init__(self, seed: int, vocab_size: int = 50_000, cjk_share: float = 0.04):
        self.rng = np.random.default_rng(seed)
        self.words = make_vocabulary(vocab_size, self.rng)
        self.word_cdf = zipf_cdf(len(self.words), 1.07)
        self.chars = list(CJK_CHARS)
        self.char_cdf = zipf_cdf(len(self.chars), 0.9)
        self.cjk_share = cjk_share

    def messages(self, n: int) -> list[str]:
        """n messages alternating user (20-60 words) and assistant (20-200)."""
        longest = np.where(np.arange(n) % 2 == 0, 61, 201)
        lengths = self.rng.integers(20, longest)
        cjk = self.rng.random(n) < self.cjk_share
        words = self.draw(self.word_cdf, int(lengths.sum())).tolist()
        texts, start = [], 0
        for length, is_cjk in zip(lengths.tolist(), cjk.tolist()):
            if is_cjk:
                texts.append(self.cjk(length))
            else:
                texts.append(" ".join([self.words[i] for i in words[start:start + length]]))
            start += length
        return texts

    def cjk(self, length: int) -> str:
        """Chinese, or Japanese when kana are mixed in, with a full stop now and then."""
        chars = [self.chars[i] for i in self.draw(self.char_cdf, length)]
        if self.rng.random() < 0.5:
            for i in self.rng.integers(0, length, length // 3):
                chars[i] = KANA[self.rng.integers(len(KANA))]
        for i in range(17, length, 17):
            chars[i] = "。"
        return "".join(chars)

    def word(self, rank: int) -> str:
        return self.words[rank]

    def draw(self, cdf: np.ndarray, n: int) -> np.ndarray:
        return np.minimum(np.searchsorted(cdf, self.rng.random(n)), len(cdf) - 1)


def make_vocabulary(size: int, rng: np.random.Generator) -> list[str]:
    words, seen = list(COMMON), set(COMMON)
    while len(words) < size:
        n = 1 + min(int(math.log2(len(words) / 1000 + 1)), 3)  # rarer, longer
        word = "".join(rng.choice(SYLLABLES, n + int(rng.integers(0, 2))))
        if rng.random() < 0.03:  # some words carry diacritics: café, naïve
            word = word.translate(ACCENTED)
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def zipf_cdf(n: int, exponent: float) -> np.ndarray:
    weights = 1.0 / np.arange(1, n + 1) ** exponent
    return np.cumsum(weights) / weights.sum()


# -- building the archive ------------------------------------------------------

# The bulk path: explicit ids, so each batch is a few executemany calls and
# the index rows go last (an UPDATE under foreign keys opens a savepoint, and
# FTS5 flushes its pending terms at every savepoint).
BULK_CONVERSATION = """
INSERT INTO conversations (id, uid, title, head_id, created_at, updated_at)
VALUES (?, ?, ?, NULL, ?, ?)"""
BULK_MESSAGE = """
INSERT INTO messages (id, uid, parent_id, root_id, conversation_id, depth, role, content, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"""
BULK_HEADS = """
UPDATE conversations
SET head_id = (SELECT max(id) FROM messages WHERE conversation_id = conversations.id)
WHERE id BETWEEN ? AND ?"""
BULK_INDEX = "INSERT INTO messages_fts (rowid, body) VALUES (?, ?)"
DEEP_HEAD = "SELECT head_id FROM conversations WHERE title = ?"
DEEP_CONVERSATION = "SELECT id FROM conversations WHERE title = ?"
BENCH_UPDATED_AT = "UPDATE conversations SET updated_at = ? WHERE id = ?"
START = np.datetime64("2024-01-01T00:00:00.000")
AFTER_BULK = np.datetime64("2026-01-01T00:00:00.000")


def cached_archive(n_messages: int, n_conversations: int,
                   depth: int) -> tuple[Path, "float | None"]:
    """The archive for these parameters, built if missing; and the bulk build rate."""
    key = f"m{n_messages}-c{n_conversations}-d{depth}-g{GENERATOR_VERSION}-{index_code_hash()}"
    path = OUT / f"archive-{key}.db"
    if path.exists():
        return path, None
    OUT.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    remove_db(partial)
    started = time.perf_counter()
    with Archive.open(partial) as archive:
        bulk_fill(archive, n_messages, n_conversations)
        deep_conversation(archive, depth)
        archive.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    rate = n_messages / (time.perf_counter() - started)
    os.replace(partial, path)
    return path, rate


def index_code_hash() -> str:
    """Text indexed differently means a different archive."""
    probe = textindex.index_text("東京タワー café C++ \x02x\x03")
    return hashlib.sha256(probe.encode()).hexdigest()[:8]


def bulk_fill(archive: Archive, n_messages: int, n_conversations: int) -> None:
    gen = TextGen(SEED)
    per_conv = max(1, n_messages // n_conversations)
    step_ms = int(2 * 365 * 86400 * 1000 / n_messages)  # two years of chats
    conv_id = msg_id = 0
    while msg_id < n_messages:
        n = min(BATCH, n_messages - msg_id)
        texts = gen.messages(n)
        stamps = [s + "Z" for s in np.datetime_as_string(
            START + (np.arange(msg_id, msg_id + n) * step_ms).astype("timedelta64[ms]"), unit="ms")]
        convs, messages = [], []
        for i, text in enumerate(texts):
            depth = (msg_id + i) % per_conv
            if depth == 0:
                conv_id += 1
                last = stamps[min(i + per_conv - 1, n - 1)]
                convs.append((conv_id, uuid.uuid4().hex, f"chat {conv_id}", stamps[i], last))
            mid = msg_id + i + 1
            role = "user" if depth % 2 == 0 else "assistant"
            messages.append((mid, uuid.uuid4().hex, mid - 1 if depth else None, mid - depth,
                             conv_id, depth, role, text, stamps[i]))
        with archive.transaction():
            archive.conn.executemany(BULK_CONVERSATION, convs)
            archive.conn.executemany(BULK_MESSAGE, messages)
            archive.conn.execute(BULK_HEADS, (convs[0][0] if convs else conv_id, conv_id))
            archive.conn.executemany(BULK_INDEX, [(m[0], textindex.index_text(m[7]))
                                                  for m in messages])
        msg_id += n
        progress(f"built {msg_id:,} / {n_messages:,} messages")
    progress("")


def deep_conversation(archive: Archive, depth: int) -> None:
    """One long chat after the others: the path() case, and a large conversation filter."""
    gen = TextGen(SEED + 1)
    stamps = [s + "Z" for s in np.datetime_as_string(
        AFTER_BULK + np.arange(depth).astype("timedelta64[s]"), unit="ms")]
    conv = archive.create_conversation(DEEP_TITLE, created_at=stamps[0])
    with archive.transaction():
        for i, text in enumerate(gen.messages(depth)):
            archive.add_message(conv.id, "user" if i % 2 == 0 else "assistant", text,
                                created_at=stamps[i])
        # A bench run must not make it the latest conversation.
        archive.conn.execute(BENCH_UPDATED_AT, (stamps[-1], conv.id))


def remove_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def progress(line: str) -> None:
    if sys.stderr.isatty():
        print(f"\r{line:<60}", end="" if line else "\r", file=sys.stderr, flush=True)


# -- measurements --------------------------------------------------------------

# The two naive searches search() is compared with.
LIKE_SCAN = """
SELECT id FROM messages WHERE content LIKE ? ESCAPE '\\' ORDER BY created_at DESC LIMIT 20"""
RANK_EVERY_MATCH = """
SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rank LIMIT 20"""
# FTS5 keeps its index in segments; a data row's id holds its segment id from bit 37 up.
SEGMENTS = "SELECT count(DISTINCT id >> 37) FROM messages_fts_data WHERE id >> 37 > 0"
OPTIMIZE = "INSERT INTO messages_fts (messages_fts) VALUES ('optimize')"


def timed(fn, *args, **kwargs) -> float:
    """Milliseconds one call takes."""
    started = time.perf_counter()
    fn(*args, **kwargs)
    return (time.perf_counter() - started) * 1000


def summary(times: list[float]) -> tuple[float, float]:
    """Median and 95th percentile."""
    ordered = sorted(times)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def insert_rates(n: int) -> list[tuple[str, str]]:
    """Archive.add_message into a fresh archive: batched, and one transaction each."""
    rows = []
    with tempfile.TemporaryDirectory(dir=OUT) as tmp, \
            Archive.open(Path(tmp) / "insert.db") as archive:
        texts = TextGen(SEED + 2).messages(n + n // 10)
        conv = archive.create_conversation("insert")
        started = time.perf_counter()
        for start in range(0, n, 100):
            with archive.transaction():
                for text in texts[start:start + 100]:
                    archive.add_message(conv.id, "user", text)
        rows.append(("insert, add_message, 100 per transaction",
                     f"{n / (time.perf_counter() - started):,.0f} messages/s"))
        started = time.perf_counter()
        for text in texts[n:]:
            archive.add_message(conv.id, "user", text)
        rows.append(("insert, add_message, one transaction each",
                     f"{(n // 10) / (time.perf_counter() - started):,.0f} messages/s"))
    return rows


def search_queries(gen: TextGen, n: int = 200) -> list[str]:
    """1-3 words, ranks drawn log-uniformly (common and rare alike), some CJK."""
    rng = np.random.default_rng(SEED + 3)
    top = len(gen.words)
    queries = []
    for i in range(n):
        if i % 10 == 9:  # a substring of CJK text, 2 or 3 characters
            text = gen.cjk(40)
            at = int(rng.integers(0, 36))
            queries.append(text[at:at + int(rng.integers(2, 4))].replace("。", "的"))
            continue
        ranks = np.exp(rng.uniform(0, math.log(top), int(rng.integers(1, 4)))).astype(int) - 1
        queries.append(" ".join(gen.word(r) for r in ranks))
    return queries


def search_latency(archive: Archive, queries: list[str], **filters) -> tuple[list[float], int]:
    """Per-query milliseconds (after one warm-up pass) and the total hits."""
    for query in queries[:20]:
        search(archive.conn, query, **filters)
    times, hits = [], 0
    for query in queries:
        started = time.perf_counter()
        hits += len(search(archive.conn, query, **filters))
        times.append((time.perf_counter() - started) * 1000)
    return times, hits


def repeat(fn, n: int) -> list[float]:
    fn()
    return [timed(fn) for _ in range(n)]


# -- the report ----------------------------------------------------------------

def run(args) -> list[tuple[str, str]]:
    path, build_rate = cached_archive(args.messages, args.conversations, args.depth)
    rows = [("archive", f"{path.name}, {path.stat().st_size / 2**20:,.0f} MiB")]
    if build_rate:
        rows.append(("build, bulk path (executemany, not add_message)",
                     f"{build_rate:,.0f} messages/s"))
    rows += insert_rates(args.insert)
    queries = search_queries(TextGen(SEED))
    with Archive.open(path) as archive:
        rows += search_rows(archive, queries, args.like, args.naive)
        rows += browse_rows(archive)
    return rows + optimized_rows(path, queries)


def browse_rows(archive: Archive) -> list:
    """Listing conversations and reading a long path."""
    listing = repeat(lambda: archive.list_conversations(limit=50), 100)
    head = archive.conn.execute(DEEP_HEAD, (DEEP_TITLE,)).fetchone()[0]
    depth = len(archive.path(head))
    reading = repeat(lambda: archive.path(head), 50)
    return [(f"list_conversations(limit=50), {archive.count_conversations():,} conversations",
             latency(listing)),
            (f"path() at depth {depth:,}", latency(reading))]


def search_rows(archive: Archive, queries: list[str], n_like: int, n_naive: int) -> list:
    times, hits = search_latency(archive, queries)
    rows = [(f"search, {len(queries)} queries, {archive.count_messages():,} messages",
             latency(times) + f", {hits / len(queries):.1f} hits/query")]
    middle = archive.count_conversations() // 2
    deep = archive.conn.execute(DEEP_CONVERSATION, (DEEP_TITLE,)).fetchone()[0]
    for label, filters in (("role=user", {"role": "user"}),
                           ("one month (since, until)",
                            {"since": "2025-03-01", "until": "2025-03-31"}),
                           (f"conversation_id, {len(archive.tree(middle))} messages",
                            {"conversation_id": middle}),
                           (f"conversation_id, {len(archive.tree(deep)):,} messages",
                            {"conversation_id": deep})):
        times, _ = search_latency(archive, queries[:100], **filters)
        rows.append((f"  with {label}, 100 queries", latency(times)))
    return rows + naive_rows(archive, queries, n_like, n_naive)


def naive_rows(archive: Archive, queries: list[str], n_like: int, n_naive: int) -> list:
    """search() against a LIKE scan, and against FTS5 ranking every match."""
    words = [q for q in queries if " " not in q][:n_like]
    fts = statistics.median(search_latency(archive, words)[0])
    like = statistics.median(query_ms(archive, LIKE_SCAN, like_pattern(w)) for w in words)
    common = [q for q in queries if set(q.split()) & set(COMMON[:20])][:n_naive]
    fts_common = statistics.median(search_latency(archive, common)[0])
    naive = [query_ms(archive, RANK_EVERY_MATCH, q) for q in common]
    return [(f"LIKE '%word%' scan, newest 20, {len(words)} single words",
             f"median {like:,.0f} ms = {like / fts:,.0f}x search() on the same words "
             f"({fts:.2f} ms)"),
            (f"FTS5 ORDER BY rank over every match, {len(common)} queries with common words",
             f"median {statistics.median(naive):,.0f} ms, max {max(naive):,.0f} ms "
             f"(search() on the same: median {fts_common:.2f} ms)")]


def latency(times: list[float]) -> str:
    med, p95 = summary(times)
    return f"median {med:.2f} ms, p95 {p95:.2f} ms, max {max(times):.1f} ms"


def optimized_rows(path: Path, queries: list[str]) -> list:
    """Search again on a copy whose index FTS5 merged into one segment."""
    with tempfile.TemporaryDirectory(dir=OUT) as tmp:
        copy = Path(tmp) / "optimized.db"
        shutil.copyfile(path, copy)
        with Archive.open(copy) as archive:
            before = archive.conn.execute(SEGMENTS).fetchone()[0]
            took = timed(archive.conn.execute, OPTIMIZE)
            times, _ = search_latency(archive, queries)
    return [(f"search, same, index merged from {before} segments to 1 ({took / 1000:.1f} s)",
             latency(times))]


def query_ms(archive: Archive, sql: str, *params) -> float:
    return timed(lambda: archive.conn.execute(sql, params).fetchall())


def like_pattern(word: str) -> str:
    escaped = word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def print_table(rows: list[tuple[str, str]]) -> None:
    width = max(len(label) for label, _ in rows)
    print(f"{'measure':<{width}}  result")
    print(f"{'-' * width}  {'-' * 40}")
    for label, value in rows:
        print(f"{label:<{width}}  {value}")


def main(argv: "list[str] | None" = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages to search")
    parser.add_argument("--conversations", type=int, default=100_000, help="conversations to list")
    parser.add_argument("--depth", type=int, default=1_000, help="path depth for path()")
    parser.add_argument("--insert", type=int, default=10_000, help="messages for the insert rate")
    parser.add_argument("--like", type=int, default=5, help="LIKE scans to run (slow)")
    parser.add_argument("--naive", type=int, default=5,
                        help="searches ranking every match to run (slow)")
    args = parser.parse_args(argv)
    print_table(run(args))


if __name__ == "__main__":
    main()
