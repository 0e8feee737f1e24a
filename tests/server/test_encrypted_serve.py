"""`chatdb serve` on an encrypted archive: the key from --key-file or $CHATDB_KEY, never a prompt."""

import os
import subprocess

from chatdb.archive import Archive
from chatdb.encryption.cipher import PLAIN_MAGIC

from ..chatdb_command import chatdb_argv, python_path
from .conftest import ROOT, chatdb_json

PASSPHRASE = "correct horse battery staple"


def encrypted(db_path, key_file):
    with Archive.open(db_path) as archive:
        archive.create_conversation("made before")
    env = {**os.environ, "PYTHONPATH": python_path()}
    done = subprocess.run(chatdb_argv("encrypt", "--db", db_path, "--key-file", key_file),
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr


def test_serve_reads_and_writes_an_encrypted_archive_with_a_key_file(start_server, db_path,
                                                                      tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text(PASSPHRASE)
    encrypted(db_path, key_file)
    server = start_server("--key-file", key_file)
    with open(f"/proc/{server.proc.pid}/cmdline", "rb") as cmdline:
        assert PASSPHRASE.encode() not in cmdline.read()
    answer = server.chat([{"role": "user", "content": "Say hello to Zanzibar"}])
    assert answer["choices"][0]["message"]["content"]
    server.stop()
    assert PASSPHRASE not in "".join(server.stderr)
    assert not db_path.read_bytes().startswith(PLAIN_MAGIC)
    assert b"Zanzibar" not in db_path.read_bytes()
    listed = chatdb_json(db_path, "list", "--key-file", key_file)
    assert {c["title"] for c in listed} >= {"made before"} and len(listed) == 2


def test_serve_without_the_key_says_what_to_do(db_path, tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text(PASSPHRASE)
    encrypted(db_path, key_file)
    env = {**os.environ, "PYTHONPATH": python_path()}
    env.pop("CHATDB_KEY", None)
    done = subprocess.run(chatdb_argv("serve", "--db", db_path, "--port", "0"), cwd=ROOT, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "an encrypted archive" in done.stderr and "--key-file" in done.stderr
