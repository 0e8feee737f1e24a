"""Searches that used to take minutes: snippets of huge messages, and Ctrl-C during a search."""

import os
import signal
import statistics
import subprocess
import time

import pytest

from chatdb.archive import Archive
from chatdb.search.fulltext import search
from chatdb.search.query import match_expression
from chatdb.search.snippets import snippets_for

from .conftest import REPO

LINE = "2024-05-01 12:00:01 worker {tag} error: connection reset by peer, retrying\n"
SIZES = {"small": 20_000, "medium": 2_000_000, "large": 20_000_000}
DISTINCT_WORDS = 250_000   # per message, four messages: a prefix query merges 1M doclists


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """An archive of pasted logs (a word on every line, 20 KB to 20 MB), and messages of
    a million distinct words; {size name: message id}."""
    path = tmp_path_factory.mktemp("logs") / "chatdb.db"
    ids = {}
    with Archive.open(path) as archive:
        conv = archive.create_conversation("logs")
        for name, size in SIZES.items():
            line = LINE.format(tag=f"tag{name}")
            ids[name] = archive.add_message(conv.id, "user", line * (size // len(line))).id
        words = archive.create_conversation("words")
        for k in range(4):
            archive.add_message(words.id, "user", " ".join(f"w{k}x{i:x}" for i in range(DISTINCT_WORDS)))
    return path, ids


def _snippet_seconds(archive, match, message_id) -> float:
    times = []
    for _ in range(5):
        start = time.perf_counter()
        snippets_for(archive.conn, match, [message_id])
        times.append(time.perf_counter() - start)
    return statistics.median(times)


@pytest.mark.alone   # compares timings: another worker beside it would blur them
def test_a_snippet_costs_the_same_whatever_the_message_size(logs):
    path, ids = logs
    with Archive.open(path) as archive:
        match = match_expression(archive.conn, "connection")
        seconds = {name: _snippet_seconds(archive, match, ids[name]) for name in SIZES}
        ratios = {name: seconds[name] / seconds["small"] for name in ("medium", "large")}
        # quadratic (FTS5's snippet() over every match): ~7,000x for 2 MB; even linear is 1,000x
        assert max(ratios.values()) < 20, (seconds, ratios)
        for name in SIZES:
            hits = search(archive.conn, f"connection tag{name}")
            assert [hit.message_id for hit in hits] == [ids[name]]
            assert f"\x02tag{name}\x03 error: \x02connection\x03 reset" in hits[0].snippet


@pytest.mark.alone   # a deadline after Ctrl-C, on a whole core
def test_ctrl_c_stops_a_long_search_at_once(logs, cli_env):
    path, _ = logs
    alone = time.monotonic()
    proc = subprocess.Popen(_search_argv(path), cwd=REPO, env=cli_env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    _wait_for_open(proc.pid, path)   # past start-up: the search is what is left
    asked = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    stopped_after = time.monotonic() - asked
    assert proc.returncode == 130, err
    assert "Traceback" not in err and out == ""
    assert stopped_after < 1.5, f"stopped {stopped_after:.2f} s after Ctrl-C"
    assert asked - alone < 60


def _search_argv(path):
    from ..chatdb_command import chatdb_argv
    return chatdb_argv("search", "w*", "--by", "words", "--db", path)


def _wait_for_open(pid: int, path, timeout: float = 60) -> None:
    """Until process `pid` has the archive at `path` open."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path):
                    return
            except FileNotFoundError:
                continue
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not open {path} in {timeout} s")


def test_ctrl_c_stops_one_long_statement(archive):
    """What makes any search stoppable: Ctrl-C inside one long SQLite statement, which
    Python alone would honour only when the statement ends."""
    import threading

    from chatdb.storage.interrupt import interruptible

    hours = ("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 1e12) "
             "SELECT count(*) FROM n")
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with interruptible(archive.conn):
            archive.conn.execute(hours).fetchone()
    assert time.monotonic() - started < 60
    assert archive.conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 0  # still usable
