"""`chatdb backup FILE`: a whole, checked copy while another process writes; faults leave no torn file."""

import os
import resource
import subprocess
import sys

import pytest

from chatdb.archive import Archive

from ..chatdb_command import chatdb_argv
from ..killing import kill_9_while_it_writes
from ..small_disk import small_tmpfs
from .conftest import REPO

# A process that adds messages until its stdin closes; it prints the count after each commit.
WRITER = """
import sys, threading
from chatdb.archive import Archive
archive = Archive.open(sys.argv[1])
conv = archive.create_conversation("written during the backup")
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
n = 0
while not stop.is_set():
    archive.add_message(conv.id, "user", f"message {n}")
    n += 1
    print(n, flush=True)
print("done", n, flush=True)
"""


def with_kv(db_path, megabytes: int) -> int:
    """An archive with a conversation and `megabytes` of KV state (random: it does not shrink)."""
    with Archive.open(db_path) as archive:
        conv = archive.create_conversation("Rust questions")
        question = archive.add_message(conv.id, "user", "What is a lifetime?")
        with archive.transaction():
            for part in range(megabytes):
                archive.kv.put(question.id, f"fp{part}", "rows", 10, os.urandom(1 << 20))
        return archive.count_messages()


def messages_in(path) -> "tuple[int, int, str]":
    with Archive.open(path) as archive:
        kv = archive.conn.execute("SELECT count(*) FROM kv_segments").fetchone()[0]
        return archive.count_messages(), kv, archive.integrity_check()


def test_a_backup_while_another_process_writes_is_whole(chatdb, db_path, cli_env, tmp_path):
    with_kv(db_path, 2)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(db_path)], cwd=REPO, env=cli_env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert int(writer.stdout.readline()) >= 1   # it has committed: writing goes on
        copy = tmp_path / "copy.db"
        shown = chatdb("backup", copy, "--json").json()
        assert shown["integrity_check"] == "ok" and shown["kv"] and not shown["encrypted"]
        writer.stdin.close()
        written = int(writer.stdout.read().split()[-1])
        assert writer.wait(timeout=60) == 0
    finally:
        writer.kill()
    count, kv, integrity = messages_in(copy)
    assert integrity == "ok" and kv == 2
    assert 2 <= count <= 1 + written   # a snapshot taken while the writer wrote
    with Archive.open(copy) as archive:   # every message of the copy has its parent there
        orphans = archive.conn.execute(
            "SELECT count(*) FROM messages m WHERE parent_id IS NOT NULL AND NOT EXISTS "
            "(SELECT 1 FROM messages p WHERE p.id = m.parent_id)").fetchone()[0]
    assert orphans == 0
    assert not list(tmp_path.glob(".copy.db.*"))
    assert oct(copy.stat().st_mode & 0o777) == "0o600"


def test_no_kv_copies_the_text_alone(chatdb, db_path, tmp_path):
    count = with_kv(db_path, 3)
    copy = tmp_path / "text.db"
    shown = chatdb("backup", copy, "--no-kv", "--json").json()
    assert shown["kv"] is False
    assert messages_in(copy) == (count, 0, "ok")
    assert copy.stat().st_size < db_path.stat().st_size // 3
    listed = chatdb("list", "--json", "--db", copy, db=False).json()   # restore is opening it
    assert [row["title"] for row in listed] == ["Rust questions"]


def test_bad_destinations_are_refused(chatdb, db_path, tmp_path):
    with_kv(db_path, 0)
    assert "a directory" in chatdb("backup", tmp_path).error(2)
    assert "the archive itself" in chatdb("backup", db_path).error(2)
    assert "no such directory" in chatdb("backup", tmp_path / "nowhere" / "x.db").error(2)


def test_a_full_disk_writes_no_backup(db_path, cli_env, tmp_path):
    """The file-size limit stands in for a full disk: every write past it fails (EFBIG)."""
    count = with_kv(db_path, 4)
    copy = tmp_path / "copy.db"
    copy.write_bytes(b"the old backup")

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (2 << 20, 2 << 20))

    done = subprocess.run(chatdb_argv("backup", copy, "--db", db_path), cwd=REPO, env=cli_env,
                          capture_output=True, text=True, timeout=120, preexec_fn=small_files)
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("chatdb: error: ") and "no backup written: a write failed" in line
    assert "the disk may be full" in line
    assert copy.read_bytes() == b"the old backup"
    assert not list(tmp_path.glob(".copy.db.*"))
    assert messages_in(db_path) == (count, 4, "ok")


def test_a_backup_onto_a_full_disk_says_so(chatdb, db_path, tmp_path):
    """A real full disk: a 4 MiB tmpfs (mounting one needs root)."""
    count = with_kv(db_path, 6)
    with small_tmpfs(tmp_path / "small") as mount:
        line = chatdb("backup", mount / "copy.db").error()
        assert "no backup written: the disk is full; the archive is untouched" in line
        assert os.listdir(mount) == []
    assert messages_in(db_path) == (count, 6, "ok")


@pytest.mark.timeout(300)
def test_kill_9_during_a_backup_leaves_the_old_copy_whole(chatdb, db_path, cli_env, tmp_path):
    with_kv(db_path, 1)
    copy = tmp_path / "copy.db"
    chatdb("backup", copy, "--json").json()
    before = messages_in(copy)
    with_kv(db_path, 96)   # long enough a copy to be caught in the middle
    kill_9_while_it_writes(chatdb_argv("backup", copy, "--db", db_path), cli_env, tmp_path,
                           ".copy.db.*.partial")
    assert messages_in(copy) == before   # the old backup, whole
    chatdb("backup", copy, "--json").json()   # the next one clears what the killed one left
    assert messages_in(copy)[1] == 1 + 96
    assert not list(tmp_path.glob(".copy.db.*"))
