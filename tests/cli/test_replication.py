"""`chatdb replicate` and `chatdb restore` with the real Litestream binary.

Two processes write at least 1,000 messages together (2 x WRITES, a KV row every tenth)
while Litestream replicates, and are killed with SIGKILL; about 20 s on a 2-core machine.
"""

import os
import signal
import subprocess
import sys
import threading

import pytest

from chatdb.archive import Archive
from chatdb.storage.replication import is_replicated
from cli.litestream import replica_url, restore

from ..chatdb_command import chatdb_argv
from ..polling import wait_until
from .conftest import PROCESS_TIMEOUT, REPO

WRITES = 500

# Adds messages (and a KV row every tenth) until killed; prints each count once committed.
WRITER = """
import os, sys
from chatdb.archive import Archive
with Archive.open(sys.argv[1]) as archive:
    conv = archive.create_conversation(sys.argv[2])
    n = 0
    while True:
        with archive.transaction():
            message = archive.add_message(conv.id, "user", f"{sys.argv[2]} {n}")
            if n % 10 == 0:
                archive.kv.put(message.id, "fp", "rows", 1, os.urandom(4096))
        n += 1
        print(n, flush=True)
"""


class Replicating:
    """`chatdb replicate` in a session of its own (its Litestream child with it)."""

    def __init__(self, db_path, replica, env):
        self.proc = subprocess.Popen(chatdb_argv("replicate", replica, "--db", db_path,
                                                 "--sync-interval", "100ms"),
                                     cwd=REPO, env=env, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        wait_until(lambda: any("replicating" in line for line in self.lines),
                   what="chatdb replicate to start")

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=60)


def rows(path) -> "tuple[set, set]":
    with Archive.open(path) as archive:
        messages = {tuple(r) for r in archive.conn.execute("SELECT id, content FROM messages")}
        kv = {tuple(r) for r in archive.conn.execute(
            "SELECT message_id, fingerprint, kind, checksum FROM kv_segments")}
    return messages, kv


def caught_up(replica, db_path, tmp_path) -> bool:
    """Whether a restore of the replica now holds every row of the archive."""
    attempt = tmp_path / f"attempt-{len(list(tmp_path.glob('attempt-*')))}.db"
    try:
        restore(replica_url(str(replica))[0], attempt)
    except Exception:   # no snapshot there yet
        return False
    return rows(attempt) == rows(db_path)


@pytest.fixture
def replicated(db_path, tmp_path, cli_env):
    started = []

    def start():
        started.append(Replicating(db_path, tmp_path / "replica", cli_env))
        return started[-1]

    yield start
    for each in started:
        each.kill()


@pytest.mark.timeout(600)
def test_replicate_two_writers_kill_9_and_restore(chatdb, db_path, tmp_path, cli_env, replicated):
    first = chatdb("ask", "--json", "--max-tokens", "8", "--temperature", "0",
                   "Name a river").json()   # real KV state, to resume from after the restore
    replicating = replicated()
    assert is_replicated(db_path)
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(db_path), name], cwd=REPO,
                                env=cli_env, stdout=subprocess.PIPE, text=True)
               for name in ("left", "right")]
    try:
        for writer in writers:
            wait_until(lambda: int(writer.stdout.readline()) >= WRITES, timeout=PROCESS_TIMEOUT,
                       what="the writers", interval=0)
    finally:
        for writer in writers:
            writer.kill()   # SIGKILL, in the middle of their writing
            writer.wait()
    messages, kv = rows(db_path)
    assert len(messages) >= 2 + 2 * WRITES and len(kv) >= 2 * WRITES // 10
    wait_until(lambda: caught_up(tmp_path / "replica", db_path, tmp_path), timeout=120,
               what="the replica to hold every committed row", interval=0.5)
    replicating.kill()   # kill -9 Litestream too

    restored = tmp_path / "restored.db"
    shown = chatdb("restore", tmp_path / "replica", restored, "--json", db=False).json()
    assert shown["integrity_check"] == "ok" and shown["messages"] == len(messages)
    assert rows(restored) == (messages, kv)
    again = chatdb("ask", "--conv", str(first["conversation_id"]), "--json", "--max-tokens", "4",
                   "--temperature", "0", "And another?", "--db", restored, db=False).json()
    assert again["kv"]["source"] == "archive" and again["kv"]["restored_tokens"] > 0


@pytest.mark.timeout(300)
def test_a_replica_directory_that_disappears_is_filled_again(chatdb, db_path, tmp_path, replicated):
    with Archive.open(db_path) as archive:
        conv = archive.create_conversation("before")
        archive.add_message(conv.id, "user", "written before")
    replicating = replicated()
    wait_until(lambda: caught_up(tmp_path / "replica", db_path, tmp_path), timeout=120,
               what="the first sync", interval=0.5)
    subprocess.run(["rm", "-rf", str(tmp_path / "replica")], check=True)
    with Archive.open(db_path) as archive:
        archive.add_message(conv.id, "user", "written after the replica went")
    wait_until(lambda: any("disappeared" in line for line in replicating.lines), timeout=60,
               what="the warning")
    (line,) = [line for line in replicating.lines if "disappeared" in line]
    assert line.startswith("chatdb: warning: ") and "nothing is lost" in line
    wait_until(lambda: caught_up(tmp_path / "replica", db_path, tmp_path), timeout=120,
               what="the replica to be whole again", interval=0.5)
    assert replicating.proc.poll() is None   # still replicating


def test_checkpoints_are_left_to_litestream_while_it_replicates(db_path, tmp_path, replicated):
    with Archive.open(db_path) as archive:
        archive.add_message(archive.create_conversation("x").id, "user", "hello")
        assert archive.kv_keeping.checkpoint()   # not replicated: checkpointed and truncated
    replicated()
    with Archive.open(db_path) as archive:
        assert archive.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        archive.add_message(archive.create_conversation("y").id, "user", "hello")
        wal = db_path.with_name("chatdb.db-wal").stat().st_size
        assert not archive.kv_keeping.checkpoint()
        assert db_path.with_name("chatdb.db-wal").stat().st_size == wal > 0


def test_refusals_are_one_line(chatdb, db_path, tmp_path):
    with Archive.open(db_path):
        pass
    (tmp_path / "there.db").write_bytes(b"")
    assert "already there" in chatdb("restore", tmp_path, tmp_path / "there.db", db=False).error(2)
    assert "nothing restored" in chatdb("restore", tmp_path / "empty", tmp_path / "new.db",
                                        db=False).error(1)
    assert not (tmp_path / "new.db").exists() and not list(tmp_path.glob(".new.db.*"))
    key = tmp_path / "key"
    key.write_text("pw")
    chatdb("encrypt", "--key-file", key, "--json").json()
    line = chatdb("replicate", tmp_path / "replica", "--key-file", key).error(2)
    assert "an encrypted archive cannot be replicated" in line
