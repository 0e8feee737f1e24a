"""A full disk, a damaged page, a zip whose header lies: reading goes on, damage is named once."""

import os
import shutil
import struct
import subprocess
import zipfile

import pytest

from chatdb.archive import Archive

from ..chatdb_command import chatdb_argv
from ..small_disk import small_tmpfs
from .conftest import REPO


@pytest.fixture
def full_disk(tmp_path, db_path, archive, sample):
    """The sample archive on a 4 MiB tmpfs with no space left (mounting one needs root)."""
    with small_tmpfs(tmp_path / "full") as mount:
        archive.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")   # the copy is the whole archive
        shutil.copy(db_path, mount / "chatdb.db")
        with open(mount / "filler", "wb") as filler:
            try:
                while True:
                    filler.write(b"\0" * 65536)
                    filler.flush()
            except OSError:
                pass
        assert os.statvfs(mount).f_bavail == 0
        yield mount / "chatdb.db"


def test_reading_works_on_a_full_disk(chatdb, full_disk, sample):
    listed = chatdb("list", "--json", "--db", full_disk, db=False).json()
    assert {row["title"] for row in listed} == {"Rust questions", "Trip to Kyoto", "Borrowing"}
    exported = chatdb("export", "--db", full_disk, db=False).json()
    assert len(exported["conversations"]) == 3
    assert chatdb("search", "lifetime", "--json", "--db", full_disk, db=False).json()
    line = chatdb("rename", str(sample.trip), "x", "--db", full_disk, db=False).error()
    assert "the disk is full: the archive can be read but not written" in line


def test_a_damaged_page_is_named(chatdb, db_path, sample, tmp_path):
    copy = tmp_path / "copy.db"
    with Archive.open(db_path) as archive:
        page = archive.conn.execute("SELECT rootpage FROM sqlite_schema WHERE name = 'message_tokens'"
                                    ).fetchone()[0]
        size = archive.conn.execute("PRAGMA page_size").fetchone()[0]
        archive.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copy(db_path, copy)
    with open(copy, "r+b") as f:
        f.seek((page - 1) * size)
        f.write(b"\xde\xad" * (size // 2))
    assert chatdb("list", "--db", copy, db=False).returncode == 0   # it reads no damaged page
    exported = chatdb("export", "--db", copy, db=False)
    assert exported.returncode == 0 and len(exported.stderr.splitlines()) == 1
    assert "the archive is damaged" in exported.stderr and "integrity_check" in exported.stderr
    asked = chatdb("ask", "-c", "--max-tokens", "1", "hi", "--db", copy, db=False).error()
    assert "the archive is damaged" in asked and "integrity_check" in asked


def test_a_zip_whose_header_lies_is_read_no_further_than_it_says(chatdb, db_path, tmp_path):
    liar = tmp_path / "export.zip"
    with zipfile.ZipFile(liar, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("conversations.json", "w") as member:   # 300 MB, never in memory here
            member.write(b"[")
            for _ in range(300):
                member.write(bytes(1_000_000))
            member.write(b"]")
    data = bytearray(liar.read_bytes())
    directory = data.rfind(b"PK\x01\x02")
    struct.pack_into("<I", data, 22, 1024)               # the local header's size...
    struct.pack_into("<I", data, directory + 24, 1024)   # ...and the central directory's
    liar.write_bytes(data)
    honest = tmp_path / "honest.zip"
    with zipfile.ZipFile(honest, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("conversations.json", b"[]")
    status, stderr, peak = _import_peak(chatdb, liar, db_path)
    assert status == 1 and "damaged inside the zip" in stderr, stderr
    _, _, baseline = _import_peak(chatdb, honest, tmp_path / "other.db")
    assert peak < baseline + 150_000_000   # it never inflated the 300 MB
    assert not db_path.exists() or Archive.open(db_path).count_conversations() == 0


def _import_peak(chatdb, source, db) -> "tuple[int, str, int]":
    """(exit status, stderr, peak resident bytes) of `chatdb import SOURCE`; the peak counts
    this process's pages at the fork too, hence a baseline measured the same way."""
    proc = subprocess.Popen(chatdb_argv("import", source, "--db", db), cwd=REPO, env=chatdb.env,
                            stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    return os.waitstatus_to_exitcode(status), proc.stderr.read(), usage.ru_maxrss * 1024
