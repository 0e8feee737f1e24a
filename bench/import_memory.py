"""Memory and speed of `chatdb import`: the streamed import against the whole-file parse.

For each format (chatdb's export, ChatGPT's conversations.json) and each size, a
file is made (tests/import_files.py: branches, forks whose origin comes later,
ChatGPT's children before their parents), then measured in fresh processes:

- streamed: `chatdb import FILE` of this checkout into a new archive, its peak
  RSS (the bare process's subtracted) and rate; then again under tracemalloc,
  for the peak of what Python allocated;
- baseline: the same of chatdb before streaming (--baseline, a git revision):
  its parse of the whole file (read_document: what the old import held in memory
  before writing a row), and its whole import for files up to --baseline-import
  messages (it wrote one add_message at a time: a million took many minutes).

Memory is a multiple of the file's size. The bare process is `import` of an
empty export, measured the same way. Run it alone (flock /tmp/cpu.lock) and read
the ratios: rates move with the machine's load.

    python bench/import_memory.py                      # 10k, 100k and 1M messages
    python bench/import_memory.py --sizes 10000 50000 --baseline main
"""

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from import_files import write_chatdb_export, write_chatgpt_export  # noqa: E402
from peak_memory import peak_rss  # noqa: E402

WRITERS = {"chatdb": write_chatdb_export, "chatgpt": write_chatgpt_export}
STREAMING_FILE = "chatdb/transfer/json_stream.py"   # the first commit that has it streams
PACKAGES = ("chatdb", "cli", "engine", "server", "migrations")

TRACED_IMPORT = """
import sys, tracemalloc
tracemalloc.start()
from cli.main import main
status = main(sys.argv[1:])
print(tracemalloc.get_traced_memory()[1], file=sys.stderr)
sys.exit(status)
"""
TRACED_PARSE = """
import sys, tracemalloc
if sys.argv[1] == "trace":
    tracemalloc.start()
from chatdb.transfer.importer import read_document
with open(sys.argv[2], "rb") as f:
    data = f.read()
fmt, records = read_document(data)
print(tracemalloc.get_traced_memory()[1] if tracemalloc.is_tracing() else 0, file=sys.stderr)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--formats", nargs="+", default=list(WRITERS), choices=list(WRITERS))
    parser.add_argument("--baseline", default=None,
                        help="git revision of the whole-file import (default: the commit "
                             f"before {STREAMING_FILE} was added, else main)")
    parser.add_argument("--baseline-import", type=int, default=200_000,
                        help="largest file the baseline also imports whole (messages)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="import-memory-") as tmp:
        work = Path(tmp)
        baseline_rev = args.baseline or _before_streaming()
        old = _checkout(baseline_rev, work / "baseline")
        print(f"baseline: {baseline_rev} ({_describe(baseline_rev)})")
        empty = work / "empty.json"
        empty.write_text('{"format": "chatdb-export", "version": 1, "conversations": []}')
        bare = {"rss": _run_import(REPO, empty, work / "bare.db")["rss"],
                "traced": _run_import(REPO, empty, work / "bare.db", traced=True)["traced"],
                "old_rss": _run_parse(old, empty, traced=False)["rss"],
                "old_traced": _run_parse(old, empty, traced=True)["traced"]}
        print(f"bare process (an empty export): import {_mb(bare['rss'])} RSS, "
              f"{_mb(bare['traced'])} traced; baseline parse {_mb(bare['old_rss'])} RSS, "
              f"{_mb(bare['old_traced'])} traced (subtracted below)\n")
        rows = []
        for fmt in args.formats:
            for size in args.sizes:
                rows.append(_measure(fmt, size, work, old, bare, args))
                _print_row(rows[-1], header=len(rows) == 1)
                sys.stdout.flush()


def _measure(fmt, size, work, old, bare, args) -> dict:
    path = work / f"{fmt}-{size}.json"
    messages = WRITERS[fmt](path, size)
    file_size = path.stat().st_size
    row = {"format": fmt, "messages": messages, "file": file_size}
    new = _run_import(REPO, path, work / "new.db")
    row["rate"] = messages / new["seconds"]
    traced = _run_import(REPO, path, work / "traced.db", traced=True)["traced"]
    row["rss"] = (new["rss"] - bare["rss"]) / file_size
    row["traced"] = (traced - bare["traced"]) / file_size
    row["old_rss"] = (_run_parse(old, path, traced=False)["rss"] - bare["old_rss"]) / file_size
    row["old_traced"] = ((_run_parse(old, path, traced=True)["traced"] - bare["old_traced"])
                         / file_size)
    if messages <= args.baseline_import:
        row["old_rate"] = messages / _run_import(old, path, work / "old.db")["seconds"]
    path.unlink()
    return row


def _print_row(row: dict, header: bool) -> None:
    if header:
        print("| format | messages | file | peak RSS over bare, x file (streamed / whole parse) "
              "| tracemalloc peak, x file (streamed / whole parse) | rate, msg/s (streamed / "
              "baseline import) | speed-up |")
        print("| --- | ---: | ---: | --- | --- | --- | ---: |")
    old_rate = row.get("old_rate")
    baseline = f"{old_rate:,.0f}" if old_rate else "not run"
    speedup = f"{row['rate'] / old_rate:.1f}x" if old_rate else "-"
    print(f"| {row['format']} | {row['messages']:,} | {_mb(row['file'])} "
          f"| {row['rss']:.2f}x / {row['old_rss']:.2f}x "
          f"| {row['traced']:.3f}x / {row['old_traced']:.2f}x "
          f"| {row['rate']:,.0f} / {baseline} | {speedup} |")


def _run_import(root: Path, path: Path, db: Path, traced: bool = False) -> dict:
    for stale in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        stale.unlink(missing_ok=True)
    argv = ["import", str(path), "--db", str(db)]
    command = ([sys.executable, "-c", TRACED_IMPORT, *argv] if traced
               else [sys.executable, "-m", "cli.main", *argv])
    return _child(root, command)


def _run_parse(root: Path, path: Path, traced: bool) -> dict:
    return _child(root, [sys.executable, "-c", TRACED_PARSE, "trace" if traced else "rss",
                         str(path)])


def _child(root: Path, command: list) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root)}
    with tempfile.NamedTemporaryFile() as report:
        started = time.perf_counter()
        status, stderr, peak = peak_rss(command, cwd=root, env=env, report=report.name,
                                        timeout=3600)
        seconds = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"{' '.join(command[:4])}... failed:\n{stderr}")
    last = stderr.strip().rsplit("\n", 1)[-1] if stderr.strip() else ""
    return {"seconds": seconds, "rss": peak, "traced": int(last) if last.isdigit() else 0}


def _before_streaming() -> str:
    added = subprocess.run(["git", "log", "--diff-filter=A", "--format=%H", "--",
                            STREAMING_FILE], cwd=REPO, capture_output=True, text=True).stdout.split()
    return f"{added[-1]}^" if added else "main"


def _checkout(rev: str, target: Path) -> Path:
    """The packages of `rev`, extracted from git (the running checkout is left alone)."""
    target.mkdir()
    archive = subprocess.run(["git", "archive", rev, *PACKAGES], cwd=REPO, capture_output=True,
                             check=True).stdout
    with tempfile.TemporaryFile() as tar:
        tar.write(archive)
        tar.seek(0)
        tarfile.open(fileobj=tar).extractall(target, filter="data")
    return target


def _describe(rev: str) -> str:
    return subprocess.run(["git", "log", "-1", "--format=%h %s", rev], cwd=REPO,
                          capture_output=True, text=True).stdout.strip()[:70]


def _mb(n: float) -> str:
    return f"{n / (1 << 20):.1f} MB"


if __name__ == "__main__":
    main()
