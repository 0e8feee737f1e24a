"""An encrypted archive (SQLCipher) against a plain one, on this machine, in one run.

    python bench/privacy.py                 # the issue's sizes: 100,000 messages, a 1 GB backup
    python bench/privacy.py --quick         # 20,000 messages, a 128 MB backup, 2 runs of resume

1. Resume of a 4,000-token chat in a new process (`chatdb ask` on a fork of its head, the KV
   restored from the archive): the time to first token and the whole command, median of
   --repeat (goal: encrypted <= 1.15x plain).
2. Search p95 at --messages messages (bench/archive.py's archive; the encrypted one is the
   same archive through `chatdb encrypt`'s conversion), 200 queries by words, warm
   (goal <= 1.3x).
3. `chatdb import` of a chatdb export of --messages messages into a new archive, in a new
   process, median of --repeat (goal <= 1.5x).
4. `chatdb backup` of an archive of --backup-mb MB (mostly KV state, incompressible) while
   another process adds a message every few milliseconds: MB/s of each.

Also the conversion itself (`chatdb encrypt` of the search archive), in MB/s.
Plain and encrypted are measured alternately, so that the machine's load falls on both.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

import archive as bench_archive  # noqa: E402
import resume  # noqa: E402
from chatdb.archive import Archive  # noqa: E402
from chatdb.encryption import cipher  # noqa: E402
from chatdb.encryption.convert import convert  # noqa: E402
from chatdb.storage.backup import backup  # noqa: E402
from import_files import write_chatdb_export  # noqa: E402

KEY = "bench passphrase"
WRITER = """
import sys, time
from chatdb.archive import Archive
with Archive.open(sys.argv[1]) as archive:
    conv = archive.create_conversation("written during the backup")
    while True:
        archive.add_message(conv.id, "user", "a message written during the backup")
        time.sleep(0.005)
"""


class Encrypted:
    """Within the block, this process and its children open archives with KEY."""

    def __init__(self, on: bool):
        self.on = on

    def __enter__(self):
        if self.on:
            os.environ[cipher.ENV] = KEY

    def __exit__(self, *exc):
        os.environ.pop(cipher.ENV, None)


def encrypted_copy(plain: Path, target: Path) -> float:
    """`target`: `plain` converted as `chatdb encrypt` does; the conversion's MB/s."""
    shutil.copy(plain, target)
    started = time.perf_counter()
    convert(target, None, cipher.Key(KEY))
    return target.stat().st_size / 2**20 / (time.perf_counter() - started)


def resume_rows(work: Path, repeat: int) -> list:
    dbs = {False: work / "resume-plain.db", True: work / "resume-encrypted.db"}
    conv = {}
    for on, db in dbs.items():
        with Encrypted(on):
            conv[on] = resume.build_chat(db, 4000)
    ttft, wall = {False: [], True: []}, {False: [], True: []}
    for _ in range(repeat):
        for on, db in dbs.items():
            with Encrypted(on):
                head = resume._fork_head(db, conv[on])
                started = time.perf_counter()
                r = resume.chatdb(db, "--conv", str(head), *resume.ASK, resume.QUESTION)
                wall[on].append((time.perf_counter() - started) * 1000)
                ttft[on].append(r["timings"]["ttft_ms"])
                assert r["kv"]["source"] == "archive", r["kv"]
    tokens = r["kv"]["restored_tokens"] + r["kv"]["computed_tokens"]
    return [row(f"resume of a {tokens:,}-token chat, time to first token (ms)", ttft, 1.15),
            row("  the whole `chatdb ask` process (ms)", wall, None)]


def search_rows(work: Path, n: int) -> "tuple[list, Path]":
    plain, _ = bench_archive.cached_archive(n, max(1, n // 20), 200)
    encrypted = work / "search-encrypted.db"
    rate = encrypted_copy(plain, encrypted)
    queries = bench_archive.search_queries(bench_archive.TextGen(bench_archive.SEED))
    p95 = {}
    for on, db in ((False, plain), (True, encrypted)):
        with Encrypted(on), Archive.open(db) as archive:
            times, _ = bench_archive.search_latency(archive, queries)
            p95[on] = [bench_archive.summary(times)[1]]
    return [row(f"search p95 at {n:,} messages (ms)", p95, 1.3),
            (f"chatdb encrypt of that archive ({plain.stat().st_size / 2**20:,.0f} MB)",
             f"{rate:,.1f} MB/s", "", "", "")], plain


def import_rows(work: Path, n: int, repeat: int) -> list:
    export = work / "export.json"
    count = write_chatdb_export(export, n)
    seconds = {False: [], True: []}
    for run in range(repeat):
        for on in (False, True):
            db = work / f"import-{on}-{run}.db"
            with Encrypted(on):
                started = time.perf_counter()
                subprocess.run([sys.executable, "-m", "cli.main", "import", str(export), "--db",
                                str(db)], cwd=ROOT, env=resume._child_env(), check=True,
                               capture_output=True)
                seconds[on].append(time.perf_counter() - started)
    return [row(f"chatdb import of {count:,} messages, a new process (s)", seconds, 1.5)]


def backup_rows(work: Path, megabytes: int) -> list:
    plain = work / "big-plain.db"
    with Archive.open(plain) as archive:
        conv = archive.create_conversation("big")
        message = archive.add_message(conv.id, "user", "a chat with a large KV state")
        for part in range(megabytes // 4):
            with archive.transaction():
                archive.kv.put(message.id, f"fp{part}", "rows", 1, os.urandom(4 << 20))
        archive.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    encrypted = work / "big-encrypted.db"
    encrypted_copy(plain, encrypted)
    rates = {}
    for on, db in ((False, plain), (True, encrypted)):
        with Encrypted(on):
            writer = subprocess.Popen([sys.executable, "-c", WRITER, str(db)], cwd=ROOT,
                                      env=resume._child_env())
            try:
                time.sleep(1)   # writing
                with Archive.open(db) as archive:
                    copied = backup(archive.conn, db, work / f"backup-{on}.db")
            finally:
                writer.kill()
                writer.wait()
        rates[on] = [copied.bytes / 2**20 / copied.seconds]
    return [row(f"chatdb backup of {plain.stat().st_size / 2**20:,.0f} MB during writes (MB/s)",
                rates, None, higher_is_better=True)]


def row(what: str, figures: dict, goal: "float | None", higher_is_better: bool = False) -> tuple:
    plain, encrypted = statistics.median(figures[False]), statistics.median(figures[True])
    ratio = plain / encrypted if higher_is_better else encrypted / plain
    verdict = "" if goal is None else ("met" if ratio <= goal else "NOT met")
    return (what, f"{plain:,.1f}", f"{encrypted:,.1f}", f"{ratio:.2f}x",
            f"<= {goal}x {verdict}" if goal else "")


def print_table(rows: list) -> None:
    header = ("", "plain", "encrypted", "encrypted/plain", "goal")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(5)]
    for r in [header, *rows]:
        print("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                        for i, (c, w) in enumerate(zip(r, widths))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--backup-mb", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="20,000 messages, 128 MB, 2 runs")
    parser.add_argument("--parts", default="resume,search,import,backup")
    args = parser.parse_args()
    if args.quick:
        args.messages, args.backup_mb, args.repeat = 20_000, 128, 2
    parts = set(args.parts.split(","))
    rows = []
    with tempfile.TemporaryDirectory(dir=bench_archive.OUT if bench_archive.OUT.exists()
                                     else None) as tmp:
        work = Path(tmp)
        if "resume" in parts:
            rows += resume_rows(work, args.repeat)
        if "search" in parts:
            rows += search_rows(work, args.messages)[0]
        if "import" in parts:
            rows += import_rows(work, args.messages, args.repeat)
        if "backup" in parts:
            rows += backup_rows(work, args.backup_mb)
    print(f"\nEncrypted (SQLCipher {sqlcipher_version()}) against plain archives, medians:")
    print_table(rows)


def sqlcipher_version() -> str:
    from sqlcipher3 import dbapi2
    return dbapi2.connect(":memory:").execute("PRAGMA cipher_version").fetchone()[0]


if __name__ == "__main__":
    main()
