"""Search benchmark: recall by words, meaning and both; latency at scale; embedding rate.

    python bench/search.py            # the labelled set, then latency at 100,000 and 1,000,000 messages
    python bench/search.py --quick    # the labelled set, then latency at 100,000 only

1. Recall. An archive of 10,000 messages: 52 chat messages (bench/search_set.py)
   among paragraphs of documentation (the docstrings of the Python standard
   library, read with `ast`, and pydoc's topics), all offline. Two query sets,
   each with one right message: the paraphrases (no word of the message
   but the commonest) and word queries (the three rarest words of the
   message). Recall@1 and @10 of `chatdb search --by words|meaning|both`.
   Also: how far the stored int8 vectors and the first pass over sign bits
   rank as float32 does (overlap of the ten nearest).
2. Embedding rate: `chatdb index`'s own loop on 1,000 of those messages,
   against the same messages one per forward pass.
3. Latency at 100,000 and 1,000,000 messages: bench/archive.py's archive
   with a vector per message (one in five with a second passage; random
   directions, which cost what real ones do), searched by words, meaning and
   both (query vectors precomputed; the query's own embedding is timed
   apart), warm and cold, and, where installed (apsw, sqlite-vec), sqlite-vec's
   scan of the same int8 vectors.

Archives are cached under bench/out/. Prints plain-text tables.
"""

import argparse
import ast
import hashlib
import os
import re
import shutil
import statistics
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from chatdb.archive import Archive  # noqa: E402
from chatdb.search.filters import make_filters  # noqa: E402
from chatdb.search.hybrid import Meaning, search  # noqa: E402
from chatdb.search.meaning import best_per_message, memory_index, narrowed, nearest, pass_sizes  # noqa: E402
from chatdb.search.vectors import VectorStore, encode  # noqa: E402
from engine.embed.embedder import Embedder  # noqa: E402
from engine.machine.threads import ThreadTuner  # noqa: E402
from search_set import PAIRS  # noqa: E402

OUT = ROOT / "bench" / "out"
CORPUS_VERSION = 1
N_CORPUS = 10_000
SEED = 2211
RATE_MESSAGES = 500
WORD_RE = re.compile(r"[a-z0-9]+")


# -- the corpus --------------------------------------------------------------------

def distractors(n: int) -> list[str]:
    """n paragraphs of documentation: stdlib docstrings and pydoc topics, deterministic."""
    import pydoc_data.topics

    paragraphs = []
    for text in pydoc_data.topics.topics.values():
        paragraphs += text.split("\n\n")
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.rglob("*.py")):
        if any(part.startswith(("test", "site-packages", "idle_test")) for part in
               path.relative_to(stdlib).parts):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef, ast.Module)):
                doc = ast.get_docstring(node)
                if doc:
                    paragraphs += doc.split("\n\n")
    seen, kept = set(), []
    for p in paragraphs:
        text = " ".join(p.split())
        if 8 <= len(text.split()) <= 200 and text not in seen:
            seen.add(text)
            kept.append(text)
    rng = np.random.default_rng(SEED)
    order = rng.permutation(len(kept))
    if len(kept) < n:
        raise SystemExit(f"only {len(kept)} paragraphs of documentation found, {n} needed")
    return [kept[i] for i in order[:n]]


def corpus() -> tuple[list[str], list[int]]:
    """The messages, and the index of each PAIRS message among them."""
    texts = distractors(N_CORPUS - len(PAIRS))
    rng = np.random.default_rng(SEED + 1)
    at = sorted(rng.choice(N_CORPUS, len(PAIRS), replace=False).tolist())
    where = {}
    for pair, i in zip(range(len(PAIRS)), at):
        texts.insert(i, PAIRS[pair][0])
        where[pair] = i
    return texts, [where[p] for p in range(len(PAIRS))]


def build_corpus_archive(embedder) -> "tuple[Path, dict]":
    """The 10,000-message archive, indexed (cached); with its float32 vectors alongside."""
    key = hashlib.sha256(f"{CORPUS_VERSION}/{embedder.fingerprint}".encode()).hexdigest()[:10]
    path = OUT / f"search-corpus-{key}.db"
    meta = path.with_suffix(".npz")
    if path.exists() and meta.exists():
        return path, dict(np.load(meta))
    OUT.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    for suffix in ("", "-wal", "-shm"):
        Path(str(partial) + suffix).unlink(missing_ok=True)
    texts, targets = corpus()
    started = time.perf_counter()
    with Archive.open(partial) as archive:
        ids = fill(archive, texts)
        store = VectorStore(archive.conn)
        with archive.transaction():
            model_id = store.add_model(embedder.fingerprint, embedder.name, embedder.dims)
        messages, vectors = [], []
        for start in range(0, len(ids), 32):
            batch = list(zip(ids[start:start + 32], texts[start:start + 32]))
            with archive.transaction():
                for m in embedder.embed_messages(batch):
                    store.put(model_id, m.message_id, m.starts, m.vectors)
                    messages += [m.message_id] * len(m.starts)
                    vectors.append(m.vectors)
            progress(f"embedded {start + len(batch):,} / {len(ids):,}")
        progress("")
        archive.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    seconds = time.perf_counter() - started
    data = {"messages": np.array(messages, np.int64), "vectors": np.concatenate(vectors),
            "targets": np.array([ids[i] for i in targets], np.int64),
            "build_rate": np.array(len(ids) / seconds)}
    np.savez(meta, **data)
    os.replace(partial, path)
    return path, data


def fill(archive, texts: list[str]) -> list[int]:
    ids, conv = [], None
    with archive.transaction():
        for i, text in enumerate(texts):
            if i % 10 == 0:
                conv = archive.create_conversation(f"chat {i // 10}")
            ids.append(archive.add_message(conv.id, "user" if i % 2 == 0 else "assistant", text).id)
    return ids


def progress(line: str) -> None:
    if sys.stderr.isatty():
        print(f"\r{line:<60}", end="" if line else "\r", file=sys.stderr, flush=True)


# -- recall ------------------------------------------------------------------------

def word_queries(texts_by_id: dict[int, str], targets: list[int]) -> list[str]:
    """For each target, its three rarest words (document frequency over the corpus)."""
    df: dict[str, int] = {}
    for text in texts_by_id.values():
        for w in set(WORD_RE.findall(text.lower())):
            df[w] = df.get(w, 0) + 1
    queries = []
    for t in targets:
        words = sorted(set(WORD_RE.findall(texts_by_id[t].lower())), key=lambda w: (df[w], w))
        queries.append(" ".join([w for w in words if not w.isdigit()][:3]))
    return queries


def recall_rows(archive, model_id: int, embedder, targets: list[int], sets) -> list:
    rows = []
    for label, queries in sets:
        vectors = [embedder.embed_query(q) for q in queries]
        found = {}
        for by in ("words", "meaning", "both"):
            ranks = []
            for q, v, target in zip(queries, vectors, targets):
                hits = search(archive.conn, q, by=by, meaning=Meaning(model_id, v), limit=10)
                ids = [h.message_id for h in hits]
                ranks.append(ids.index(target) + 1 if target in ids else None)
            found[by] = ranks
            at1 = sum(r == 1 for r in ranks) / len(ranks)
            at10 = sum(r is not None for r in ranks) / len(ranks)
            rows.append((f"{label}, by {by}", f"recall@1 {at1:.2f}, recall@10 {at10:.2f}"))
        gain = (sum(r is not None for r in found["both"]) - sum(r is not None for r in found["words"])) / len(queries)
        rows.append((f"{label}: both - words, recall@10", f"{gain:+.2f}"))
    return rows


def quantization_rows(archive, model_id: int, embedder, data: dict, queries: list[str]) -> list:
    """Overlap of the ten nearest messages with float32's: int8 exact, and the sign-bit
    passes keeping as large a share of the archive as they keep at 100k and 1M."""
    messages, f32 = data["messages"], data["vectors"]
    rows_db = archive.conn.execute(
        "SELECT id, message_id, start, vector FROM message_vectors WHERE model_id = ? "
        "AND length(vector) > 0 ORDER BY id", (model_id,)).fetchall()
    stored = [(r[1], r[2], r[3]) for r in rows_db]
    index = memory_index(archive.conn, model_id)
    n = len(stored)
    def scaled(big: int) -> "tuple[int, int]":
        asymmetric, rescored = pass_sizes(big)
        return max(10, asymmetric * n // big), max(10, rescored * n // big)
    shares = [("as at 100,000 messages", scaled(120_000)), ("as at 1,000,000", scaled(1_200_000))]
    overlaps = {"int8": []} | {label: [] for label, _ in shares}
    by_row = dict(zip([r[0] for r in rows_db], range(n)))
    for q in queries:
        v = embedder.embed_query(q)
        scores = f32 @ v
        exact = []
        for i in np.argsort(-scores):
            if messages[i] not in exact:
                exact.append(int(messages[i]))
                if len(exact) == 10:
                    break
        top = [x.message_id for x in best_per_message(stored, v, 10)]
        overlaps["int8"].append(len(set(top) & set(exact)) / 10)
        for label, (asymmetric, rescored) in shares:
            rows = index.rows[narrowed(index.bits, v, asymmetric, rescored)]
            picked = [stored[by_row[int(r)]] for r in rows]
            got = [x.message_id for x in best_per_message(picked, v, 10)]
            overlaps[label].append(len(set(got) & set(exact)) / 10)
    out = [("ten nearest vs float32, int8 stored vectors (exact)",
            f"overlap {statistics.mean(overlaps['int8']):.3f}")]
    for label, (asymmetric, rescored) in shares:
        out.append((f"  sign-bit passes, {asymmetric:,} then {rescored:,} of {n:,} passages "
                    f"({label})", f"overlap {statistics.mean(overlaps[label]):.3f}"))
    return out


# -- embedding rate ----------------------------------------------------------------

def rate_rows(embedder, texts: list[str], threads: int) -> list:
    from engine.embed.indexer import Indexer
    import tempfile

    rows = []
    # Chat-length messages: three paragraphs each (documentation paragraphs are short).
    sample = [" ".join(texts[i:i + 3]) for i in range(0, 3 * RATE_MESSAGES, 3)]
    tokens = sum(embedder.model.count_tokens(t) + 2 for t in sample)
    for n_threads in sorted({threads, os.cpu_count() or 1}):
        embedder.model.set_threads(n_threads)
        with tempfile.TemporaryDirectory(dir=OUT) as tmp, \
                Archive.open(Path(tmp) / "rate.db") as archive:
            fill(archive, sample)
            cpu, load = time.process_time(), os.getloadavg()[0]
            report = Indexer(archive, embedder).run()
            cpu = time.process_time() - cpu
        rows.append((f"chatdb index: {report.embedded:,} chat-length messages ({tokens / len(sample):.0f} "
                     f"tokens each on average), {n_threads} thread{'s' * (n_threads > 1)}"
                     + (" (as chosen)" if n_threads == threads else ""),
                     f"{report.per_second:.1f} messages/s (load average {load:.1f} on "
                     f"{os.cpu_count()} cores); {report.embedded / cpu:.1f} per CPU-second"))
    embedder.model.set_threads(threads)
    few = sample[:200]
    started = time.perf_counter()
    for text in few:
        embedder.embed_messages([(0, text)])
    alone = len(few) / (time.perf_counter() - started)
    started = time.perf_counter()
    for i in range(0, len(few), 32):
        embedder.embed_messages([(0, t) for t in few[i:i + 32]])
    batched = len(few) / (time.perf_counter() - started)
    rows.append((f"  the same 200 messages, one per forward pass (baseline for "
                 f"{embedder.model.batch_tokens} tokens / {embedder.model.max_seq} sequences a pass)",
                 f"{alone:.1f} messages/s; batched {batched:.1f} = {batched / alone:.2f}x"))
    return rows


# -- latency at scale --------------------------------------------------------------

def scaled_archive(n: int, dims: int, fingerprint: str, name: str) -> Path:
    """bench/archive.py's archive of n messages, with a vector per message (one in five
    with a second passage) under the embedding model's fingerprint; cached."""
    import archive as archive_bench

    source, _ = archive_bench.cached_archive(n, max(1, n // 10), 1_000)
    path = OUT / f"search-scaled-{source.stem}-v{CORPUS_VERSION}-{fingerprint[:8]}.db"
    if path.exists():
        return path
    partial = path.with_suffix(".partial")
    shutil.copyfile(source, partial)
    rng = np.random.default_rng(SEED + 2)
    with Archive.open(partial) as archive:
        store = VectorStore(archive.conn)
        with archive.transaction():
            model_id = store.add_model(fingerprint, name, dims)
        last = store.last_message_id()
        for start in range(1, last + 1, 20_000):
            ids = np.arange(start, min(last + 1, start + 20_000))
            extra = ids[rng.random(len(ids)) < 0.2]
            rows = []
            for chunk, group in ((0, ids), (1, extra)):
                v = rng.standard_normal((len(group), dims)).astype(np.float32)
                v /= np.linalg.norm(v, axis=1, keepdims=True)
                rows += [(model_id, int(m), chunk, 0, encode(x)) for m, x in zip(group, v)]
            with archive.transaction():
                archive.conn.executemany(
                    "INSERT INTO message_vectors (model_id, message_id, chunk, start, vector) "
                    "VALUES (?, ?, ?, ?, ?)", rows)
            progress(f"vectors for {min(last, start + 19_999):,} / {last:,} messages")
        progress("")
        archive.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    os.replace(partial, path)
    return path


def latency_rows(path: Path, model_id_of, queries: list[str], vectors: list[np.ndarray]) -> list:
    rows = []
    with Archive.open(path) as archive:
        model_id = model_id_of(archive)
        n = archive.count_messages()
        passages = archive.conn.execute("SELECT count(*) FROM message_vectors").fetchone()[0]
        size = archive.conn.execute(
            "SELECT sum(pgsize) FROM dbstat WHERE name IN "
            "('message_vectors', 'message_vectors_by_model', "
            "'sqlite_autoindex_message_vectors_1')").fetchone()[0]
        rows.append((f"{n:,} messages, {passages:,} passages",
                     f"vectors take {size / 2**20:,.0f} MiB = {size / n:,.0f} bytes a message"))
        started = time.perf_counter()
        memory_index(archive.conn, model_id)
        rows.append(("  first search in a process: vectors loaded as sign bits",
                     f"{(time.perf_counter() - started) * 1000:,.0f} ms"))
        pairs = list(zip(queries, vectors))
        for by in ("words", "meaning", "both"):
            for q, v in pairs[:10]:
                search(archive.conn, q, by=by, meaning=Meaning(model_id, v))
            times = []
            for q, v in pairs:
                started = time.perf_counter()
                search(archive.conn, q, by=by, meaning=Meaning(model_id, v))
                times.append((time.perf_counter() - started) * 1000)
            rows.append((f"  search by {by}, {len(pairs)} queries", latency(times)))
        rows += sqlite_vec_rows(path, model_id, vectors[:20], archive, n)
    return rows


def sqlite_vec_rows(path: Path, model_id: int, vectors, archive, n: int) -> list:
    """sqlite-vec's cosine over the same int8 vectors (a scan in C), against nearest()."""
    try:
        import apsw
        import sqlite_vec
    except ImportError:
        return [("  sqlite-vec", "not installed here (pip install apsw sqlite-vec)")]
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    sql = ("SELECT message_id, vec_distance_cosine(vec_int8(vector), vec_int8(?)) AS d "
           "FROM message_vectors WHERE model_id = ? AND length(vector) > 0 ORDER BY d LIMIT 50")
    times = []
    for v in vectors:
        started = time.perf_counter()
        conn.execute(sql, (encode(v), model_id)).fetchall()
        times.append((time.perf_counter() - started) * 1000)
    conn.close()
    filters = make_filters(archive.conn, 50, None, None, None, None)
    ours = []
    for v in vectors:
        started = time.perf_counter()
        nearest(archive.conn, model_id, v, filters, 50)
        ours.append((time.perf_counter() - started) * 1000)
    ratio = statistics.median(times) / statistics.median(ours)
    return [(f"  sqlite-vec {sqlite_vec.__version__ if hasattr(sqlite_vec, '__version__') else ''}"
             f" exact int8 cosine scan, 50 nearest, {len(vectors)} queries",
             latency(times) + f" = {ratio:.1f}x nearest() here ({statistics.median(ours):.1f} ms)")]


def latency(times: list[float]) -> str:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"median {statistics.median(ordered):.1f} ms, p95 {p95:.1f} ms"


def print_table(title: str, rows) -> None:
    width = max(len(label) for label, _ in rows)
    print(f"\n{title}\n{'measure':<{width}}  result\n{'-' * width}  {'-' * 40}")
    for label, value in rows:
        print(f"{label:<{width}}  {value}")
    sys.stdout.flush()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="latency at 100,000 messages only")
    parser.add_argument("--embed-model", metavar="PATH", help="a GGUF embedding model")
    args = parser.parse_args(argv)
    threads = ThreadTuner().choice.batch
    embedder = Embedder.open(None, args.embed_model, threads=threads)
    path, data = build_corpus_archive(embedder)
    targets = data["targets"].tolist()
    with Archive.open(path) as archive:
        model_id = VectorStore(archive.conn).model_id(embedder.fingerprint)
        texts = dict(archive.conn.execute("SELECT id, content FROM messages").fetchall())
        paraphrases = [q for _, q in PAIRS]
        words = word_queries(texts, targets)
        print_table(f"recall: {len(texts):,} messages, {len(PAIRS)} labelled queries per set "
                    f"({embedder.name})",
                    recall_rows(archive, model_id, embedder, targets,
                                [("paraphrases", paraphrases), ("shared words", words)])
                    + quantization_rows(archive, model_id, embedder, data, paraphrases + words))
    ordered = [texts[i] for i in sorted(texts)]
    rates = rate_rows(embedder, ordered, threads)
    started = time.perf_counter()
    query_vectors = [embedder.embed_query(q) for q in paraphrases]
    per_query = (time.perf_counter() - started) * 1000 / len(paraphrases)
    print_table("embedding", rates + [("a query's own embedding (before any search by meaning)",
                                       f"{per_query:.1f} ms")])
    import archive as archive_bench
    word_load = archive_bench.search_queries(archive_bench.TextGen(archive_bench.SEED), 100)
    vectors = (query_vectors * 2)[:len(word_load)]
    for n in (100_000,) + (() if args.quick else (1_000_000,)):
        scaled = scaled_archive(n, embedder.dims, embedder.fingerprint, embedder.name)
        print_table(f"latency at {n:,} messages (bench/archive.py's text and queries)",
                    latency_rows(scaled, lambda a: VectorStore(a.conn).model_id(embedder.fingerprint),
                                 word_load, vectors))
    embedder.close()


if __name__ == "__main__":
    main()
