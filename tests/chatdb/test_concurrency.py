"""Real processes writing to one archive file at once."""

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from chatdb.archive import Archive
from chatdb.storage.migrate import available

REPO = Path(__file__).resolve().parents[2]

# Each worker imports everything first, says "ready", then waits for a line on
# stdin: the test releases them all at once.
PRELUDE = textwrap.dedent("""
    import json, sys, traceback
    sys.path.insert(0, sys.argv[1])
    from chatdb.archive import Archive

    def shared_conversation(archive, uid):
        with archive.transaction():  # find-or-create under the write lock
            conv = archive.conversation_by_uid(uid)
            return conv or archive.create_conversation(uid, uid=uid)

    print("ready", flush=True)
""")

CHATTER = PRELUDE + textwrap.dedent("""
    path, worker, turns = sys.stdin.readline().split()
    worker, turns = int(worker), int(turns)
    archive = Archive.open(path)
    own = archive.create_conversation(f"w{worker}", system_prompt=f"worker {worker}")
    shared = [shared_conversation(archive, f"shared-{k}") for k in range(2)]
    forks = []
    for i in range(turns):
        with archive.transaction():
            m = archive.add_message(own.id, "user" if i % 2 == 0 else "assistant",
                                    f"w{worker} own {i}")
            archive.tokens.put(m.id, "tok", [worker, i])
            archive.kv.put(m.id, "fp", "rows", 2, bytes([worker, i % 256]) * 64)
        archive.add_message(shared[i % 2].id, "user", f"w{worker} shared {i}")
        if i % 25 == 24:
            path_now = archive.messages(own.id)
            fork = archive.fork(path_now[len(path_now) // 2].id, title=f"w{worker} fork {i}")
            archive.add_message(fork.id, "user", f"w{worker} fork {i}")
            forks.append(fork.id)
    print(json.dumps({"own": own.id, "shared": [c.id for c in shared], "forks": forks}))
""")

OPENER = PRELUDE + textwrap.dedent("""
    for line in sys.stdin:
        archive = Archive.open(line.strip())
        conv = shared_conversation(archive, "shared")
        archive.add_message(conv.id, "user", "hello")
        archive.close()
        print("done", flush=True)
""")


def start(tmp_path, code: str, n: int) -> list:
    script = tmp_path / "worker.py"
    script.write_text(code)
    procs = [subprocess.Popen([sys.executable, str(script), str(REPO)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
             for _ in range(n)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
    return procs


def go(procs, lines) -> None:
    for p, line in zip(procs, lines):
        p.stdin.write(line + "\n")
        p.stdin.flush()


def assert_sound(path):
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")
    conn.close()


def test_processes_racing_to_create_and_migrate_a_new_archive(tmp_path):
    """Four processes open the same new file at the same moment, again and again."""
    rounds, n = 150, 4
    procs = start(tmp_path, OPENER, n)
    try:
        for r in range(rounds):
            path = tmp_path / f"race{r}.db"
            go(procs, [str(path)] * n)
            for p in procs:
                line = p.stdout.readline().strip()
                if line != "done":
                    p.stdin.close()
                    pytest.fail(f"round {r}: {p.stderr.read().strip().splitlines()[-1:]}")
            with Archive.open(path) as archive:
                assert archive.count_conversations() == 1
                assert archive.count_messages() == n
                assert archive.conn.execute(
                    "SELECT count(*) FROM schema_migrations").fetchone()[0] == len(available())
    finally:
        for p in procs:
            p.stdin.close()
            p.wait(timeout=30)
    assert all(p.returncode == 0 for p in procs)


def test_four_writers_lose_nothing(tmp_path):
    workers, turns = 4, 150
    path = tmp_path / "shared.db"  # fresh: they race on the migrations too
    procs = start(tmp_path, CHATTER, workers)
    go(procs, [f"{path} {w} {turns}" for w in range(workers)])
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and "locked" not in err, err
        assert err == ""
        results.append(json.loads(out))

    forks_each = turns // 25
    with Archive.open(path) as archive:
        assert archive.count_conversations() == workers * (1 + forks_each) + 2
        assert archive.count_messages() == workers * (1 + 2 * turns + forks_each)
        c = archive.conn
        assert c.execute("SELECT count(*) FROM message_tokens").fetchone()[0] == workers * turns
        assert c.execute("SELECT count(*) FROM kv_segments").fetchone()[0] == workers * turns
        assert c.execute("SELECT count(*) FROM messages_fts").fetchone()[0] == archive.count_messages()

        # Each worker's own conversation: exactly its turns, in order.
        for w, result in enumerate(results):
            path_ = archive.messages(result["own"])
            assert [m.content for m in path_] == [f"worker {w}"] + [
                f"w{w} own {i}" for i in range(turns)]
            assert [m.depth for m in path_] == list(range(turns + 1))
            for i, m in enumerate(path_[1:]):
                assert archive.tokens.get(m.id, "tok").tolist() == [w, i]
                assert archive.kv.get(m.id, "fp").decode() == bytes([w, i % 256]) * 64
            assert len(result["forks"]) == forks_each
            for fork_id in result["forks"]:
                fork_path = archive.messages(fork_id)
                assert fork_path[:-1] == path_[:len(fork_path) - 1]
                assert fork_path[-1].content.startswith(f"w{w} fork ")

        # Both shared conversations: every message any worker added, on one
        # chain (no head update lost), each worker's in its own order.
        shared_ids = {tuple(r["shared"]) for r in results}
        assert len(shared_ids) == 1  # all found the same two conversations
        for k, conv_id in enumerate(shared_ids.pop()):
            chain = archive.messages(conv_id)
            assert len(chain) == workers * turns // 2
            assert len(archive.tree(conv_id)) == len(chain)
            for w in range(workers):
                mine = [m.content for m in chain if m.content.startswith(f"w{w} ")]
                assert mine == [f"w{w} shared {i}" for i in range(k, turns, 2)]
    assert_sound(path)


@pytest.mark.timeout(120)
def test_a_writer_waits_for_the_lock_instead_of_failing(archive, db_path, tmp_path):
    """Another process holds the write lock until the test lets it go: reads go on
    meanwhile (WAL), and a write started under the lock waits and then succeeds,
    instead of failing with "database is locked". Ordered by events, not by time."""
    conv = archive.create_conversation("c")
    archive.add_message(conv.id, "user", "before")
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sqlite3, sys
        conn = sqlite3.connect(sys.argv[1], isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("UPDATE conversations SET title = 'held'")
        print("locked", flush=True)
        sys.stdin.readline()  # held until the test says
        conn.execute("COMMIT")
        print("released", flush=True)
    """), str(db_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert [m.content for m in archive.messages(conv.id)] == ["before"]  # WAL: reads go on
        writing, outcome = threading.Event(), {}

        def write():
            with Archive.open(db_path) as writer:
                writing.set()
                try:
                    outcome["message"] = writer.add_message(conv.id, "user", "after the wait")
                except Exception as exc:  # "database is locked" would land here
                    outcome["error"] = exc

        thread = threading.Thread(target=write)
        thread.start()
        assert writing.wait(timeout=60)
        assert "message" not in outcome  # it cannot have written: the lock is held
        holder.stdin.write("go\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "released"
        thread.join(timeout=60)
        assert not thread.is_alive() and "error" not in outcome, outcome
    finally:
        if holder.poll() is None:
            holder.stdin.close()  # lets it commit and end, whatever failed above
        holder.wait(timeout=30)
    assert holder.returncode == 0
    assert [m.content for m in archive.messages(conv.id)] == ["before", "after the wait"]
    assert archive.conversation(conv.id).title == "held"
