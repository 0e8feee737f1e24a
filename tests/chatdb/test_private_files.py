"""Files chatdb writes: 0600, directories 0700, whole or not at all (umask 000 here)."""

import os
import stat

import pytest

from chatdb.storage import private_files


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_create_makes_every_missing_directory_private(tmp_path):
    path = tmp_path / "a" / "b" / "c" / "file"
    assert private_files.create(path)
    assert mode(path) == 0o600
    for directory in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "c"):
        assert mode(directory) == 0o700
    assert not private_files.create(path)  # there already: left as it is


def test_write_atomic_is_private_and_replaces_a_looser_file(tmp_path):
    target = tmp_path / "chat.md"
    target.write_text("old")
    os.chmod(target, 0o644)
    private_files.write_atomic(target, "new text ✓")
    assert target.read_text(encoding="utf-8") == "new text ✓"
    assert mode(target) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["chat.md"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "chat.md"
    target.write_text("old")

    with pytest.raises(TypeError):
        private_files.write_atomic(target, object())  # not text: fails after the temporary is made
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["chat.md"]


def test_write_atomic_into_a_missing_directory_names_the_file(tmp_path):
    target = tmp_path / "no" / "chat.md"
    with pytest.raises(FileNotFoundError) as exc_info:
        private_files.write_atomic(target, "x")
    assert exc_info.value.filename == str(target)


def test_tighten_leaves_private_and_missing_files_alone(tmp_path):
    private = tmp_path / "private"
    private.write_text("x")
    os.chmod(private, 0o600)
    loose = tmp_path / "loose"
    loose.write_text("x")
    os.chmod(loose, 0o664)
    changed = private_files.tighten(private, loose, tmp_path / "missing")
    assert [(t.path, t.old_mode) for t in changed] == [(loose, 0o664)]
    assert mode(loose) == 0o600 and mode(private) == 0o600
