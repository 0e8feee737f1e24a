"""`chatdb import` streams its file: memory does not grow with it, and it is still
one transaction whose every link (forks, writers, ChatGPT's node order) comes out as before."""

import json
import sqlite3
import sys
import zipfile
from pathlib import Path

import pytest

from chatdb.transfer.writer import CACHE_KIB

from ..chatdb_command import chatdb_argv
from .conftest import PROCESS_TIMEOUT, REPO

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from import_files import (PER_CONVERSATION, SHARED, expected_chatgpt_rows,  # noqa: E402
                          write_chatdb_export, write_chatgpt_export)
from peak_memory import peak_rss  # noqa: E402

SMALL = 6_000   # messages; the large files hold 4x as many


def _import(chatdb, source: Path, db: Path) -> "tuple[int, str, int]":
    """(exit status, stderr, peak resident bytes) of a real `chatdb import SOURCE`."""
    return peak_rss(chatdb_argv("import", source, "--db", db), cwd=REPO, env=chatdb.env,
                    report=db.with_suffix(".peak"), timeout=PROCESS_TIMEOUT)


def _zipped(path: Path) -> Path:
    target = path.with_suffix(".zip")
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(path, "export/conversations.json")
    return target


@pytest.mark.timeout(PROCESS_TIMEOUT)
def test_memory_does_not_grow_with_the_file(chatdb, tmp_path):
    """Peak RSS above a bare import (an empty file), for a file and one 4x larger, of
    each format (ChatGPT's in its .zip). What SQLite's page cache may hold is set apart:
    the archive's pages, up to the cache's cap. The rest grows 4.3x with a whole-file
    parse (7 MB to 32 MB for chatdb's format), 2x at most here."""
    empty = tmp_path / "empty.json"
    empty.write_text('{"format": "chatdb-export", "version": 1, "conversations": []}')
    status, stderr, bare = _import(chatdb, empty, tmp_path / "bare.db")
    assert status == 0, stderr
    for name, write in (("chatdb", write_chatdb_export), ("chatgpt", write_chatgpt_export)):
        growth = {}
        for size in (SMALL, 4 * SMALL):
            path = tmp_path / f"{name}-{size}.json"
            write(path, size)
            source = _zipped(path) if name == "chatgpt" else path
            db = tmp_path / f"{name}-{size}.db"
            status, stderr, peak = _import(chatdb, source, db)
            assert status == 0, stderr
            growth[size] = peak - bare - min(db.stat().st_size, CACHE_KIB << 10)
            _check_imported(name, db, size)
        assert growth[4 * SMALL] < 2 * growth[SMALL] + (4 << 20), (name, growth, bare)


def _check_imported(name: str, db: Path, size: int) -> None:
    """Every message where the file put it: forks' shared messages with their origin
    (later in the file), ChatGPT's children (listed before their parents) under them."""
    conn = sqlite3.connect(db)
    if name == "chatgpt":
        rows, heads = expected_chatgpt_rows(size)
        stored = set(conn.execute(
            "SELECT m.uid, p.uid, m.role, m.content, c.uid FROM messages m "
            "LEFT JOIN messages p ON p.id = m.parent_id JOIN conversations c ON c.id = m.conversation_id"))
        assert stored == rows
        assert dict(conn.execute("SELECT c.uid, m.uid FROM conversations c "
                                 "JOIN messages m ON m.id = c.head_id")) == heads
        return
    # m-N is written by conv-(N // PER_CONVERSATION), whatever entry lists it first.
    assert conn.execute(
        "SELECT count(*) FROM messages m JOIN conversations c ON c.id = m.conversation_id "
        f"WHERE c.uid != 'conv-' || (CAST(substr(m.uid, 3) AS INTEGER) / {PER_CONVERSATION})"
    ).fetchone()[0] == 0
    forks = conn.execute(
        "SELECT c.uid, json_extract(c.meta, '$.forked_from'), h.uid FROM conversations c "
        "JOIN messages h ON h.id = c.head_id WHERE json_extract(c.meta, '$.forked_from') IS NOT NULL").fetchall()
    assert len(forks) == conn.execute("SELECT count(*) FROM conversations").fetchone()[0] // 4
    source_uid = dict(conn.execute("SELECT id, uid FROM messages"))
    for uid, source, head in forks:
        number = int(uid.removeprefix("conv-"))
        assert source_uid[source] == f"m-{(number + 1) * PER_CONVERSATION + SHARED - 1}"
        assert head == f"m-{(number + 1) * PER_CONVERSATION - 1}"


def _dump(db: Path) -> list:
    conn = sqlite3.connect(db)
    return [conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
            for table in ("conversations", "messages", "messages_fts", "sqlite_master")]


@pytest.mark.timeout(PROCESS_TIMEOUT)
def test_an_error_late_in_a_large_file_leaves_the_archive_as_it_was(chatdb, tmp_path, db_path):
    first = tmp_path / "first.json"
    write_chatdb_export(first, 300)
    assert chatdb("import", first).returncode == 0
    before = _dump(db_path)
    path = tmp_path / "late.json"
    count = write_chatdb_export(path, 5_000)   # thousands of rows written before the error
    text = path.read_text()
    last = text.rindex('"role": "assistant"')
    path.write_text(text[:last] + '"role": "robot"' + text[last + len('"role": "assistant"'):])
    line = chatdb("import", path).error(1)
    conversations = count // (4 * PER_CONVERSATION - SHARED) * 4
    assert f'{path}: conversation {conversations} ("Chat {conversations - 1}"): message "m-' in line
    assert "\"role\" is 'robot'" in line
    assert _dump(db_path) == before


def test_a_zip_piped_to_stdin_is_imported(chatdb, tmp_path, chatgpt_export):
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(chatgpt_export))
    piped = chatdb("import", "-", "--json", input=_zipped(path).read_bytes())
    assert piped.returncode == 0, piped.stderr
    report = json.loads(piped.stdout)
    assert report["file"] == "<stdin>" and report["format"] == "chatgpt"
    assert report["conversations"] == len(chatgpt_export) and report["messages"] > 0
