"""Archives and files that are not what they seem, and options given in odd places."""

import os
import shutil
import stat
import zipfile

import pytest

from chatdb.archive import Archive
from chatdb.transfer.records import ImportFormatError
from chatdb.transfer.importer import import_source
from chatdb.transfer.source import open_source

# Root ignores file modes; without its capabilities it is held to them like anyone.
AS_USER = (["setpriv", "--inh-caps=-all", "--bounding-set=-all"] if os.geteuid() == 0 else [])


@pytest.fixture
def read_only_dir(tmp_path, sample, db_path):
    """The sample archive in a directory its user cannot write."""
    if AS_USER and not shutil.which("setpriv"):
        pytest.skip("needs setpriv to drop root's capabilities")
    Archive.open(db_path).close()  # a clean close: no -wal or -shm files left
    os.chmod(db_path.parent, stat.S_IRUSR | stat.S_IXUSR)
    os.chmod(db_path, stat.S_IRUSR)
    yield db_path
    os.chmod(db_path.parent, stat.S_IRWXU)
    os.chmod(db_path, stat.S_IRUSR | stat.S_IWUSR)


def _as_user(chatdb, *args):
    import subprocess

    from .conftest import Result
    done = subprocess.run(AS_USER + chatdb.argv(*args), cwd=chatdb.cwd, env=chatdb.env,
                          capture_output=True, text=True, timeout=300)
    return Result(done.returncode, done.stdout, done.stderr)


def test_a_read_only_archive_can_be_read_and_a_write_names_the_file(chatdb, read_only_dir):
    listed = _as_user(chatdb, "list", "--json").json()
    assert sorted(c["title"] for c in listed) == ["Borrowing", "Rust questions", "Trip to Kyoto"]
    assert "Kyoto" in _as_user(chatdb, "search", "Kyoto").stdout
    line = _as_user(chatdb, "rename", "2", "New title").error(1)
    assert str(read_only_dir) in line and "read-only" in line
    with Archive.open(read_only_dir) as archive:
        assert archive.conversation(2).title == "Trip to Kyoto"


def test_an_empty_file_does_not_become_an_archive(chatdb, tmp_path):
    empty = tmp_path / "notes.txt"
    empty.touch()
    line = chatdb("list", "--db", empty, db=False).error(1)
    assert str(empty) in line and "an empty file, not a chatdb archive" in line
    assert empty.stat().st_size == 0


def test_a_new_archive_is_created_whole(chatdb, tmp_path):
    fresh = tmp_path / "new" / "chatdb.db"
    for reading in (("list",), ("search", "x"), ("export",), ("show", "1")):
        assert "no archive there" in chatdb(*reading, "--db", fresh, db=False).error()
    assert not fresh.parent.exists()   # reading commands make no archive (nor its directory)
    empty = tmp_path / "empty.json"
    empty.write_text('{"format": "chatdb-export", "version": 1, "conversations": []}')
    assert chatdb("import", empty, "--json", "--db", fresh, db=False).json()["conversations"] == 0
    assert sorted(p.name for p in fresh.parent.iterdir()) == ["chatdb.db"]
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600
    assert chatdb("list", "--json", "--db", fresh, db=False).json() == []


def _zip(path, member: str, data: bytes) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(member, data)


def test_a_truncated_zip_is_reported_as_such(chatdb, tmp_path, chatgpt_export, db_path):
    import json
    whole = tmp_path / "export.zip"
    _zip(whole, "conversations.json", json.dumps(chatgpt_export).encode())
    cut = tmp_path / "cut.zip"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    line = chatdb("import", cut).error(1)
    assert f"{cut}: a damaged or truncated zip file" in line
    assert not db_path.exists()


def test_only_a_conversation_too_large_for_memory_is_refused_and_before_it_is_read(tmp_path):
    # The file is streamed: its size is no limit (a 4.8 MB file imports under a 1 MB
    # limit), one conversation's text is, and it is refused before it is read whole.
    big = tmp_path / "export.zip"
    _zip(big, "export/conversations.json", b"[" + b" " * 5_000_000 + b"]")  # inflates 1,000x
    assert big.stat().st_size < 100_000
    with Archive.open(tmp_path / "a.db") as archive, open_source(str(big)) as source:
        assert import_source(archive, source, limit=1 << 20).conversations == 0
    huge = tmp_path / "conversations.json"
    huge.write_bytes(b'[{"title": "' + b"x" * 2_000_000 + b'"}]')
    with Archive.open(tmp_path / "a.db") as archive, open_source(str(huge)) as source:
        with pytest.raises(ImportFormatError, match=r"conversations.json: conversation 1 is "
                                                    r"over 1.0 MB of text"):
            import_source(archive, source, limit=1 << 20)


def test_a_zip_member_that_inflates_past_its_declared_size_is_cut_at_the_limit(tmp_path):
    lying = tmp_path / "lying.zip"
    _zip(lying, "conversations.json", b" " * 3_000_000)
    data = bytearray(lying.read_bytes())
    # Make the central directory (which zipfile trusts) declare 100 bytes.
    central = data.rfind(b"PK\x01\x02")
    data[central + 24: central + 28] = (100).to_bytes(4, "little")
    lying.write_bytes(bytes(data))
    with pytest.raises(ImportFormatError, match="conversations.json: damaged inside the zip"):
        with open_source(str(lying)) as source:
            while source.read(1 << 20):
                pass


def test_root_model_option_is_not_overwritten_by_the_subcommand(chatdb, tmp_path):
    missing = tmp_path / "elsewhere.gguf"
    assert str(missing) in chatdb("--model", missing, "ask", "Hello").error(1)
    assert str(missing) in chatdb("ask", "--model", missing, "Hello").error(1)


def test_ask_checks_sampling_options_as_set_does(chatdb, db_path):
    done = chatdb("ask", "--top-p", "5", "Hello")
    assert done.returncode == 2 and "top_p must be a number above 0, at most 1, not '5'" in done.stderr
    done = chatdb("ask", "--top-k", "-3", "Hello")
    assert done.returncode == 2 and "top_k must be a whole number from 0" in done.stderr
    assert not db_path.exists()
