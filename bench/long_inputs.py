"""What long inputs cost: a search's snippets by message size, a first turn by chat length.

    python bench/long_inputs.py            # 20 KB / 2 MB / 20 MB messages; 10 / 1,000 / 10,000-message chats
    python bench/long_inputs.py --quick    # 20 KB / 2 MB; 10 / 1,000

Each row is the median of --repeats runs and its ratio to the table's first
row (the baseline, measured in the same run): a snippet of a 20 MB pasted log
against one of 20 KB, the first answer on an imported chat of 10,000 messages
against one of 10 (the window and its prefill are the same size). Prints a
plain-text table.
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from a checkout

from chatdb.archive import Archive  # noqa: E402
from chatdb.search.query import match_expression  # noqa: E402
from chatdb.search.snippets import snippets_for  # noqa: E402

LINE = "2024-05-01 12:00:01 worker error: connection reset by peer, retrying\n"


def snippet_rows(folder: Path, sizes: list[int], repeats: int) -> list[tuple[str, float]]:
    rows = []
    for size in sizes:
        with Archive.open(folder / f"log{size}.db") as archive:
            conv = archive.create_conversation("log")
            message = archive.add_message(conv.id, "user", LINE * (size // len(LINE)))
            match = match_expression(archive.conn, "connection")
            rows.append((f"snippet, a {_size(size)} message", _median(
                lambda: snippets_for(archive.conn, match, [message.id]), repeats)))
    return rows


def first_turn_rows(folder: Path, lengths: list[int], repeats: int) -> list[tuple[str, float]]:
    from engine.chat import Engine

    rows = []
    for n in lengths:
        path = folder / f"chain{n}.db"
        with Archive.open(path) as archive:
            conv = archive.create_conversation("imported")
            with archive.transaction():
                for i in range(n):
                    archive.add_message(conv.id, "user" if i % 2 == 0 else "assistant",
                                        f"Message {i}: " + "the tide came in over the stones " * 12)
        times = []
        for _ in range(repeats):
            with Archive.open(path) as archive:
                archive.conn.execute("DELETE FROM message_tokens")   # as imported: no tokens
                archive.conn.execute("DELETE FROM kv_segments")      # and no KV
                engine = Engine.open(archive, None, n_ctx=2048, use_kv=False, draft="off")
                try:
                    conv_id = archive.latest_conversation().id
                    head = archive.conversation(conv_id).head_id
                    started = time.perf_counter()
                    engine.answer(conv_id, head, sampling=engine.sampling.with_(max_tokens=1))
                    times.append(time.perf_counter() - started)
                finally:
                    engine.close()
        rows.append((f"first turn, a chat of {n:,} messages", statistics.median(times)))
    return rows


def _median(run, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _size(n: int) -> str:
    return f"{n // 1_000_000} MB" if n >= 1_000_000 else f"{n // 1000} KB"


def _table(title: str, rows: list[tuple[str, float]]) -> None:
    base = rows[0][1]
    print(f"\n{title}\n{'case':<40} {'median':>10} {'ratio':>8}")
    for name, seconds in rows:
        print(f"{name:<40} {seconds * 1000:>8.1f} ms {seconds / base:>7.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    sizes = [20_000, 2_000_000] + ([] if args.quick else [20_000_000])
    lengths = [10, 1_000] + ([] if args.quick else [10_000])
    with tempfile.TemporaryDirectory() as folder:
        _table("Snippets by message size (baseline: 20 KB)",
               snippet_rows(Path(folder), sizes, args.repeats))
        _table("First turn on an imported chat, by its length (baseline: 10 messages)",
               first_turn_rows(Path(folder), lengths, max(1, args.repeats // 2)))


if __name__ == "__main__":
    main()
