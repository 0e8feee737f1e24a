"""What the archive drafter's index costs: memory per stored token, the time to build it from
the stored arrays, to read it back from its file, and to bring it up to date.

A made-up archive (no model: the index reads token arrays only): --messages
answers of about --tokens tokens each, made of sentences drawn from a pool
(so that runs repeat, as they do in chats), and as many arrays of another
tokenizer, which are not indexed. Figures are measured at this size and
extrapolated linearly to 1M messages and to 100M stored tokens (the build is
one pass over the arrays: linear in tokens, plus a per-answer part); the
budget (--budget-mb, 64 by default) bounds the memory whatever the size.

    python bench/draft_index.py [--messages 20000] [--tokens 200] [--budget-mb 64]
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from chatdb.archive import Archive  # noqa: E402
from engine.decode.archive_index import ArchiveIndex  # noqa: E402

OWN, OTHER = "own-tokenizer", "other-tokenizer"


def fill(archive: Archive, messages: int, tokens: int, seed: int = 0) -> int:
    """`messages` answers (and their questions) with arrays in both tokenizers; tokens stored."""
    rng = np.random.default_rng(seed)
    pool = [rng.integers(0, 49_000, rng.integers(8, 24)).astype(np.int32) for _ in range(5_000)]
    stored, conv = 0, archive.create_conversation("bench")
    for start in range(0, messages, 1_000):
        with archive.transaction():
            for _ in range(min(1_000, messages - start)):
                q = archive.add_message(conv.id, "user", "q")
                a = archive.add_message(conv.id, "assistant", "a")
                parts, n = [], 0
                while n < tokens:
                    parts.append(pool[int(rng.integers(len(pool)))])
                    n += len(parts[-1])
                array = np.concatenate(parts)
                archive.tokens.put(a.id, OWN, array)
                archive.tokens.put(a.id, OTHER, array[::-1])
                archive.tokens.put(q.id, OWN, array[:10])
                stored += len(array)
    return stored


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--budget-mb", type=float, default=64)
    args = parser.parse_args(argv)
    budget = int(args.budget_mb * (1 << 20))
    with tempfile.TemporaryDirectory() as tmp:
        with Archive.open(Path(tmp) / "index.db") as archive:
            stored = fill(archive, args.messages, args.tokens)
            index = ArchiveIndex(OWN, budget)
            started = time.perf_counter()
            index.refresh(archive.token_sources)
            build_s = time.perf_counter() - started
            path = ArchiveIndex.file_for(archive.db_path, OWN)
            started = time.perf_counter()
            index.save(path)
            save_s = time.perf_counter() - started
            started = time.perf_counter()
            again = ArchiveIndex(OWN, budget)
            again.load(path)
            again.refresh(archive.token_sources)
            load_s = time.perf_counter() - started
            fill(archive, 100, args.tokens, seed=1)
            started = time.perf_counter()
            again.refresh(archive.token_sources)
            step_ms = (time.perf_counter() - started) * 1000
            file_mb = path.stat().st_size / 1e6
    per_token = index.nbytes / stored
    print(f"{args.messages:,} answers, {stored:,} tokens ({stored / args.messages:.0f} per answer), "
          f"as many arrays of another tokenizer (not indexed); budget {args.budget_mb:g} MB")
    print(f"{'':<34} {'measured':>12} {'at 1M answers':>14} {'at 100M tokens':>15}")
    scale_m, scale_t = 1e6 / args.messages, 1e8 / stored
    unbounded = (index.anchors * 8 * 2 ** index.shift + index.ids.nbytes * 2)

    def row(name, value, m, t, unit):
        print(f"{name:<34} {value:>11.2f}{unit} {m:>13.2f}{unit} {t:>14.2f}{unit}")

    size_m, size_t = (min(budget, unbounded * scale) for scale in (scale_m, scale_t))
    row("index memory (MB)", index.nbytes / 1e6, size_m / 1e6, size_t / 1e6, " ")
    row("bytes per stored token", per_token, size_m / (stored * scale_m), size_t / 1e8, " ")
    print(f"{'':<34} (shift {index.shift}: 1 position in {2 ** index.shift} is an anchor)")
    row("build from the arrays (s)", build_s, build_s * scale_m, build_s * scale_t, " ")
    # Reading and writing the file scale with the index, which the budget caps.
    per_byte_load, per_byte_save = load_s / index.nbytes, save_s / index.nbytes
    row("read back from its file (s)", load_s, per_byte_load * size_m, per_byte_load * size_t, " ")
    row("write its file (s)", save_s, per_byte_save * size_m, per_byte_save * size_t, " ")
    print(f"{'file (MB)':<34} {file_mb:>12.2f}")
    print(f"{'bring up to date: 100 new (ms)':<34} {step_ms:>12.1f}")
    print("extrapolated linearly (memory: capped by the budget, which thins the anchors); "
          "measured once on a shared machine")


if __name__ == "__main__":
    main()
