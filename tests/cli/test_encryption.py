"""An encrypted archive (SQLCipher), through the real `chatdb` command: every front-end opens it
with the key from $CHATDB_KEY, --key-file or the terminal, and the key is nowhere else."""

import hashlib
import json
import subprocess
import sys

import pytest

from chatdb.archive import Archive
from chatdb.encryption.cipher import PLAIN_MAGIC

from .conftest import PROCESS_TIMEOUT, REPO
from .test_console_pty import Terminal

PASSPHRASE = "correct horse battery staple"
NEW_PASSPHRASE = "tr0ub4dor&3"

# Adds `count` messages to a conversation of its own, one transaction each.
WRITER = """
import sys
from chatdb.archive import Archive
with Archive.open(sys.argv[1]) as archive:
    conv = archive.create_conversation(sys.argv[2])
    for n in range(int(sys.argv[3])):
        archive.add_message(conv.id, "user", f"{sys.argv[2]} {n}")
"""


@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "key"
    path.write_text(PASSPHRASE + "\n")
    return path


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def files_of(db_path) -> bytes:
    """The archive's bytes on disk, its WAL's included."""
    wal = db_path.with_name(db_path.name + "-wal")
    return db_path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def test_encrypt_in_place_then_every_command_needs_the_key(chatdb, db_path, archive, sample,
                                                           key_file, tmp_path):
    assert "another process has the archive open" in chatdb("encrypt", "--key-file",
                                                            key_file).error()
    archive.close()
    shown = chatdb("encrypt", "--key-file", key_file, "--json").json()
    assert shown["encrypted"] is True
    assert not db_path.read_bytes().startswith(PLAIN_MAGIC)
    assert b"Kyoto" not in files_of(db_path) and b"lifetime" not in files_of(db_path)

    before = digest(db_path)
    missing = chatdb("list").error(2)
    assert "an encrypted archive" in missing and "$CHATDB_KEY" in missing and "--key-file" in missing
    wrong = chatdb("list", env={"CHATDB_KEY": "not it"}).error(2)
    assert "the key does not open this archive" in wrong
    assert digest(db_path) == before and not db_path.with_name("chatdb.db-wal").exists()

    titles = {"Rust questions", "Trip to Kyoto", "Borrowing"}
    assert {c["title"] for c in chatdb("list", "--json", "--key-file", key_file).json()} == titles
    with_env = {"CHATDB_KEY": PASSPHRASE}
    hits = chatdb("search", "Kyoto", "--json", env=with_env).json()
    assert hits and hits[0]["conversation_id"] == sample.trip
    counted = chatdb("sql", "SELECT count(*) AS n FROM messages", "--json", env=with_env).json()
    assert counted == [{"n": 7}]
    assert "refused" in chatdb("sql", "DELETE FROM messages", env=with_env).error(2)
    exported = chatdb("export", "--json", env=with_env).json()
    assert len(exported["conversations"]) == 3
    (tmp_path / "export.json").write_text(json.dumps(exported))
    fresh = tmp_path / "fresh.db"   # a new archive made with a key is encrypted
    chatdb("import", tmp_path / "export.json", "--json", "--db", fresh, db=False, env=with_env).json()
    assert not fresh.read_bytes().startswith(PLAIN_MAGIC)
    assert len(chatdb("list", "--json", "--db", fresh, db=False, env=with_env).json()) == 3

    copy = tmp_path / "copy.db"
    assert chatdb("backup", copy, "--json", env=with_env).json()["encrypted"] is True
    assert not copy.read_bytes().startswith(PLAIN_MAGIC)
    assert chatdb("list", "--db", copy, db=False).error(2)
    assert len(chatdb("list", "--json", "--db", copy, db=False, env=with_env).json()) == 3

    new_key = tmp_path / "new-key"
    new_key.write_text(NEW_PASSPHRASE)
    chatdb("rekey", "--new-key-file", new_key, "--json", env=with_env).json()
    assert "the key does not open" in chatdb("list", env=with_env).error(2)
    assert len(chatdb("list", "--json", "--key-file", new_key).json()) == 3
    chatdb("decrypt", "--key-file", new_key, "--json").json()
    assert db_path.read_bytes().startswith(PLAIN_MAGIC)
    assert {c["title"] for c in chatdb("list", "--json").json()} == titles
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".chatdb")) == []


def test_ask_resumes_and_searches_by_meaning_in_an_encrypted_archive(chatdb, db_path):
    with_env = {"CHATDB_KEY": PASSPHRASE}
    first = chatdb("ask", "--json", "--max-tokens", "12", "--temperature", "0",
                   "Name a river in Egypt", env=with_env).json()
    assert not db_path.read_bytes().startswith(PLAIN_MAGIC)
    assert b"Egypt" not in files_of(db_path)
    again = chatdb("ask", "-c", "--json", "--max-tokens", "8", "--temperature", "0",
                   "And in France?", env=with_env).json()
    assert again["conversation_id"] == first["conversation_id"]
    assert again["kv"]["source"] == "archive" and again["kv"]["restored_tokens"] > 0
    chatdb("index", "--json", env=with_env).json()
    hits = chatdb("search", "--by", "meaning", "a long African waterway", "--json",
                  env=with_env).json()
    assert hits and hits[0]["conversation_id"] == first["conversation_id"]
    stored = chatdb("kv", "--json", env=with_env).json()["stored_bytes"]
    assert stored > 0
    chatdb("kv", "budget", "1KiB", "--json", env=with_env).json()   # the KV budget applies too
    assert chatdb("kv", "prune", "--json", env=with_env).json()["stored_bytes"] < stored


def test_two_processes_write_one_encrypted_archive(chatdb, db_path, cli_env):
    env = {**cli_env, "CHATDB_KEY": PASSPHRASE}
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(db_path), name, "150"],
                                cwd=REPO, env=env) for name in ("left", "right")]
    assert [w.wait(timeout=PROCESS_TIMEOUT) for w in writers] == [0, 0]
    listed = chatdb("list", "--json", env={"CHATDB_KEY": PASSPHRASE}).json()
    assert sorted((c["title"], c["message_count"]) for c in listed) == [("left", 150),
                                                                       ("right", 150)]
    assert not db_path.read_bytes().startswith(PLAIN_MAGIC)


def test_the_key_is_asked_at_a_terminal_and_shown_nowhere(chatdb, db_path, cli_env, key_file):
    with Archive.open(db_path) as archive:
        archive.create_conversation("Trip to Kyoto")
    env = {**cli_env, "TERM": "xterm-256color"}
    term = Terminal(["encrypt", "--db", db_path], env)
    term.wait_for("new passphrase: ")
    term.type(PASSPHRASE + "\r")
    term.wait_for("new passphrase again: ")
    term.type(PASSPHRASE + "\r")
    term.wait_for("encrypted ")
    assert term.close() == 0
    term = Terminal(["list", "--db", db_path], env)
    term.wait_for("key of ")
    term.type(PASSPHRASE + "\r")
    term.wait_for("Trip to Kyoto")
    assert term.close() == 0
    assert PASSPHRASE not in term.screen   # typed without echo

    doctor = chatdb("doctor", "--json", "--key-file", key_file)
    assert doctor.returncode == 0, doctor.stderr
    assert '"encrypted": true' in doctor.stdout
    outputs = doctor.stdout + doctor.stderr + chatdb("list", env={"CHATDB_KEY": "nope"}).stderr
    assert PASSPHRASE not in outputs and "nope" not in outputs
    assert PASSPHRASE.encode() not in files_of(db_path)
