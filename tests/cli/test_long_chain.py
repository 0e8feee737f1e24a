"""The first ask on a long imported chat: it reads only its window, and stops at once when asked.

Each message's tokens were computed by rendering the whole path before it
(1,000 messages: 45 s; 100,000: still going after 10 minutes), and Ctrl-C
was honoured only when that ended.
"""

import json
import shutil
import signal
import subprocess
import time

import pytest

from chatdb.archive import Archive

from ..chatdb_command import chatdb_argv
from .conftest import REPO

MESSAGES = 10_000


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """An archive holding one imported chat of 10,000 messages (no tokens, no KV)."""
    folder = tmp_path_factory.mktemp("chain")
    messages, parent = [], None
    for i in range(MESSAGES):
        uid = f"{i:032x}"
        messages.append({"uid": uid, "parent": parent, "conversation": "c" * 32,
                         "role": "user" if i % 2 == 0 else "assistant",
                         "content": f"Message {i}: the tide came in over the stones again.",
                         "status": "complete", "created_at": "2024-01-01T00:00:00.000Z", "meta": {}})
        parent = uid
    export = {"format": "chatdb-export", "version": 1, "conversations": [{
        "uid": "c" * 32, "title": "long", "created_at": "2024-01-01T00:00:00.000Z",
        "updated_at": "2024-01-01T00:00:00.000Z", "system_prompt": None, "model": None,
        "meta": {}, "head": parent, "messages": messages}]}
    source = folder / "long.json"
    source.write_text(json.dumps(export))
    db = folder / "chatdb.db"
    done = subprocess.run(chatdb_argv("import", source, "--db", db), cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return db


def _token_rows(db) -> int:
    with Archive.open(db) as archive:
        return archive.conn.execute("SELECT count(*) FROM message_tokens").fetchone()[0]


def test_the_first_ask_reads_only_its_window(chatdb, chain, tmp_path):
    db = tmp_path / "chatdb.db"
    shutil.copy(chain, db)
    asked = chatdb("ask", "-c", "--json", "--max-tokens", "1", "--ctx", "512", "And then?",
                   "--db", db, db=False)
    assert asked.returncode == 0 and "messages after the system prompt are left out" in asked.stderr
    assert json.loads(asked.stdout)["left_out_messages"] > MESSAGES * 0.9
    assert _token_rows(db) < 100   # the window's messages (and the answer), not 10,000


@pytest.mark.alone   # a deadline after the signal, on a whole core
@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_the_first_ask_stops_at_once(chatdb, chain, tmp_path, sig, status):
    db = tmp_path / "chatdb.db"
    shutil.copy(chain, db)
    proc = subprocess.Popen(chatdb.argv("ask", "-c", "--max-tokens", "50", "--ctx", "4096",
                                        "And then?", "--db", db, db=False),
                            cwd=REPO, env=chatdb.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    _wait_for_cpu(proc.pid, 3.0)   # past start-up: reading the chat or its window
    asked = time.monotonic()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == status, err
    assert time.monotonic() - asked < 1.5, err
    assert "Traceback" not in err
    with Archive.open(db) as archive:   # the question is kept (an answer only if one began)
        assert "And then?" in [m.content for m in archive.messages(archive.latest_conversation().id)]


def _wait_for_cpu(pid: int, seconds: float, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        if (int(fields[11]) + int(fields[12])) / 100 >= seconds:
            return
        time.sleep(0.02)
    raise AssertionError(f"process {pid} did not use {seconds} s of CPU in {timeout} s")
