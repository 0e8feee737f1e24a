"""`chatdb browse`: a real Datasette on a free port, on a real archive; the views are there and
labelled, full-text search works on chat_search, the tables for the machine are hidden."""

import importlib.util
import os
import queue
import re
import signal
import subprocess
import threading

import httpx
import pytest

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(importlib.util.find_spec("datasette") is None,
                       reason="Datasette is not installed (pip install 'chatdb[browse]')"),
]
RUNNING = re.compile(r"Uvicorn running on (http://[^ ]+)")
READY_WITHIN = 120   # seconds: Datasette's start on a loaded 2-core machine


@pytest.fixture
def browsing(chatdb, sample):
    chatdb("tag", sample.rust, "rust", "learning")
    chatdb("pin", sample.rust)
    proc = subprocess.Popen(chatdb.argv("browse", "--port", "0"), cwd=chatdb.cwd, env=chatdb.env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    lines: "queue.Queue[str | None]" = queue.Queue()

    def read():
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    seen = []
    try:
        while True:
            line = lines.get(timeout=READY_WITHIN)
            assert line is not None, f"chatdb browse exited {proc.wait()}: {''.join(seen)}"
            seen.append(line)
            if match := RUNNING.search(line):
                break
        yield match[1]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) in (0, 128 + signal.SIGTERM)   # Quit, once Datasette stopped


def test_datasette_shows_the_chats_and_hides_the_kv(browsing, sample):
    rows = httpx.get(f"{browsing}/chatdb/chats.json", params={"_shape": "array"}, timeout=60).json()
    by_id = {row["id"]: row for row in rows}
    assert set(by_id) == {sample.rust, sample.trip, sample.fork}
    assert by_id[sample.rust]["title"] == "Rust questions" and by_id[sample.rust]["pinned"] == 1
    assert by_id[sample.rust]["tags"] == '["learning","rust"]'
    assert by_id[sample.trip]["first_message"] == "Plan three days in Kyoto"

    database = httpx.get(f"{browsing}/chatdb.json", timeout=60).json()
    hidden = {t["name"]: t["hidden"] for t in database["tables"]}
    assert hidden["kv_segments"] and hidden["message_tokens"] and hidden["message_vectors"]
    assert {v["name"] for v in database["views"]} == {"chats", "chat_messages", "chat_search"}
    page = httpx.get(f"{browsing}/chatdb", timeout=60).text
    assert "kv_segments" not in page and "message_tokens" not in page    # not listed
    assert "Chats" in page or "chats" in page

    found = httpx.get(f"{browsing}/chatdb/chat_search.json",
                      params={"_search": "Kyoto", "_shape": "array"}, timeout=60).json()
    assert [row["text"] for row in found] == ["Plan three days in Kyoto"]
    labelled = httpx.get(f"{browsing}/chatdb/chats", timeout=60).text
    assert "A conversation a row" in labelled


def test_datasette_reads_only(browsing):
    written = httpx.get(f"{browsing}/chatdb.json",
                        params={"sql": "DELETE FROM messages", "_shape": "array"}, timeout=60)
    assert written.status_code == 400


def test_a_port_in_use_is_one_line(chatdb, sample):
    with __import__("socket").socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = chatdb("browse", "--port", port)
    assert f"cannot serve on 127.0.0.1:{port}" in result.error()
