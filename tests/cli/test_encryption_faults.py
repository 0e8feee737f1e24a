"""Faults while an archive is encrypted or rekeyed in place: a full disk, a file-size limit,
kill -9. The archive stays whole, as it was, and one line says why."""

import hashlib
import resource
import shutil
import subprocess

from chatdb.encryption.cipher import PLAIN_MAGIC

from ..chatdb_command import chatdb_argv
from ..killing import kill_9_while_it_writes
from ..small_disk import small_tmpfs
from .conftest import REPO
from .test_backup import messages_in, with_kv

PASSPHRASE = "correct horse battery staple"


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def leftovers(folder) -> list:
    return sorted(p.name for p in folder.iterdir() if ".converting" in p.name)


def test_a_full_disk_during_encryption_leaves_the_archive_as_it_was(chatdb, db_path, tmp_path):
    count = with_kv(db_path, 3)
    with small_tmpfs(tmp_path / "small", "5m") as mount:
        archive = mount / "chatdb.db"
        shutil.copy(db_path, archive)
        before = digest(archive)
        line = chatdb("encrypt", "--db", archive, db=False, env={"CHATDB_KEY": PASSPHRASE}).error()
        assert "not converted: the disk is full" in line and "the archive is as it was" in line
        assert digest(archive) == before and leftovers(mount) == []
        assert messages_in(archive) == (count, 3, "ok")


def test_a_file_size_limit_during_rekey_leaves_the_old_key_working(chatdb, db_path, tmp_path,
                                                                    cli_env):
    count = with_kv(db_path, 4)
    chatdb("encrypt", "--json", env={"CHATDB_KEY": PASSPHRASE}).json()
    before = digest(db_path)

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (2 << 20, 2 << 20))

    env = {**cli_env, "CHATDB_KEY": PASSPHRASE, "CHATDB_NEW_KEY": "another one"}
    done = subprocess.run(chatdb_argv("rekey", "--db", db_path), cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120, preexec_fn=small_files)
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.splitlines()
    assert "not converted: a write failed" in line and "the archive is as it was" in line
    assert digest(db_path) == before and leftovers(tmp_path) == []
    listed = chatdb("list", "--json", env={"CHATDB_KEY": PASSPHRASE}).json()
    assert sum(c["message_count"] for c in listed) == count


def test_kill_9_during_encrypt_and_during_rekey_leaves_the_old_file_whole(chatdb, db_path,
                                                                           tmp_path, cli_env):
    count = with_kv(db_path, 64)   # long enough a conversion to be caught in the middle
    before = digest(db_path)
    env = {**cli_env, "CHATDB_KEY": PASSPHRASE}
    kill_9_while_it_writes(chatdb_argv("encrypt", "--db", db_path), env, tmp_path,
                           ".chatdb.db.*.converting")
    assert digest(db_path) == before   # still the plain archive, byte for byte
    assert messages_in(db_path) == (count, 64, "ok")

    chatdb("encrypt", "--json", env={"CHATDB_KEY": PASSPHRASE}).json()   # clears what was left
    assert leftovers(tmp_path) == [] and not db_path.read_bytes().startswith(PLAIN_MAGIC)
    before = digest(db_path)
    kill_9_while_it_writes(chatdb_argv("rekey", "--db", db_path),
                           {**env, "CHATDB_NEW_KEY": "another one"}, tmp_path,
                           ".chatdb.db.*.converting")
    assert digest(db_path) == before
    listed = chatdb("list", "--json", env={"CHATDB_KEY": PASSPHRASE}).json()   # the old key
    assert sum(c["message_count"] for c in listed) == count
