"""Several people on one `chatdb serve --keys FILE`: each sees, resumes and is limited alone.

A real server process (one slot, so that every request meets the sequence the
previous one left) and real HTTP clients; the archive is read back through
the real `chatdb` commands.
"""

import hashlib
import json
import sqlite3
import subprocess

import httpx
import pytest

from ..chatdb_command import chatdb_argv
from ..polling import wait_until
from .conftest import ROOT, Server, chatdb_json

pytestmark = pytest.mark.timeout(600)

SYSTEM = "You are a careful assistant. " * 12    # long enough to be worth restoring
QUESTION = [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Name a colour of the sky."}]


def bearer(key: str) -> dict:
    return {"authorization": f"Bearer {key}"}


def ask(server: Server, key: str, messages, **fields) -> httpx.Response:
    body = {"model": "any", "messages": messages, "temperature": 0, "max_tokens": 8, **fields}
    return server.post("/v1/chat/completions", body, headers=bearer(key))


def add_user(keys, name: str) -> str:
    done = subprocess.run(chatdb_argv("serve", "--keys", keys, "--user-key", name), cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def keys(tmp_path):
    path = tmp_path / "keys"
    hashed = hashlib.sha256(b"bob-secret").hexdigest()
    path.write_text("# name key\nalice alice-secret\n"
                    f"bob sha256:{hashed}\nroot root-secret admin\n"
                    "dave dave-secret tpm=1\n")
    return path


def kv_stored(db, message_id: int) -> bool:
    with sqlite3.connect(db) as raw:
        return raw.execute("SELECT 1 FROM kv_segments WHERE message_id = ?",
                           (message_id,)).fetchone() is not None


def wait_for_kv(db, message_id: int) -> None:
    """Until the server's writer has stored the message's KV (it stores after answering)."""
    wait_until(lambda: kv_stored(db, message_id), what="the message's KV stored", interval=0.1)


def test_another_users_exact_messages_resume_nothing_of_theirs(start_server, db_path, keys):
    erin = add_user(keys, "erin")
    assert erin.startswith("cdb-") and erin not in keys.read_text()   # only its hash is kept
    server = start_server("--keys", keys, "--parallel", "1")

    first = ask(server, "alice-secret", QUESTION)
    assert first.status_code == 200, first.text
    answer = first.json()["choices"][0]["message"]["content"]
    conversation = QUESTION + [{"role": "assistant", "content": answer},
                               {"role": "user", "content": "And at night?"}]
    again = ask(server, "alice-secret", conversation).json()
    alice_id = again["chatdb"]["conversation_id"]
    assert again["chatdb"]["reused_messages"] == 3 and again["chatdb"]["restored_tokens"] > 0
    alice_before = chatdb_json(db_path, "export", str(alice_id))

    # Bob sends Alice's exact messages on the slot Alice's sequence is still in.
    bob = ask(server, "bob-secret", conversation).json()
    assert bob["chatdb"]["conversation_id"] != alice_id
    assert bob["chatdb"]["reused_messages"] == 0
    assert bob["chatdb"]["restored_tokens"] == 0 and bob["chatdb"]["kv_source"] == "none"
    assert bob["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert bob["chatdb"]["added_messages"] == len(conversation)
    assert chatdb_json(db_path, "export", str(alice_id)) == alice_before   # untouched

    # Bob's own resend resumes Bob's chat; Alice's still resumes hers.
    bob_again = ask(server, "bob-secret", conversation).json()
    assert bob_again["chatdb"]["conversation_id"] == bob["chatdb"]["conversation_id"]
    assert bob_again["chatdb"]["reused_messages"] == len(conversation)
    assert ask(server, "alice-secret", conversation).json()["chatdb"]["conversation_id"] == alice_id
    # Erin's key, added by --user-key, is hers (and hers alone: the question is Alice's).
    erin_asked = ask(server, erin, QUESTION)
    assert erin_asked.status_code == 200 and erin_asked.json()["chatdb"]["reused_messages"] == 0
    assert erin_asked.json()["chatdb"]["restored_tokens"] == 0
    erin_id = erin_asked.json()["chatdb"]["conversation_id"]

    # Raw completions are stored nowhere, but their KV is their user's too.
    prompt = {"model": "any", "prompt": SYSTEM + "Once upon a time", "max_tokens": 4,
              "temperature": 0}
    cached = lambda key: server.post("/v1/completions", prompt, headers=bearer(key)).json()[  # noqa: E731
        "usage"]["prompt_tokens_details"]["cached_tokens"]
    cached("alice-secret")
    assert cached("alice-secret") > 0 and cached("bob-secret") == 0

    listed = {c["id"]: c["owner"] for c in chatdb_json(db_path, "list")}
    assert listed == {alice_id: "alice", bob["chatdb"]["conversation_id"]: "bob", erin_id: "erin"}
    assert [c["id"] for c in chatdb_json(db_path, "list", "--user", "bob")] == [
        bob["chatdb"]["conversation_id"]]
    exported = chatdb_json(db_path, "export")["conversations"]
    assert sorted(c["owner"] for c in exported) == ["alice", "bob", "erin"]
    hits = chatdb_json(db_path, "search", "night", "--by", "words", "--user", "alice")
    assert hits and {h["conversation_id"] for h in hits} == {alice_id}


def test_keys_limits_and_stats(start_server, keys):
    server = start_server("--keys", keys, "--parallel", "1", "--max-concurrent", "1")
    assert ask(server, "wrong", QUESTION).status_code == 401
    assert server.post("/v1/chat/completions", {}, headers={}).status_code == 401

    # Alice's second request while her first streams: 429, Retry-After, the OpenAI shape.
    body = {"model": "any", "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 3000, "stream": True,
            "temperature": 0, "logit_bias": {"0": -100, "1": -100, "2": -100}}  # no end
    with httpx.stream("POST", server.base + "/chat/completions", json=body,
                      headers=bearer("alice-secret"), timeout=120) as streaming:
        assert streaming.status_code == 200
        chunks = (line for line in streaming.iter_lines() if line.startswith("data:"))
        assert '"role"' in next(chunks) and '"finish_reason": null' in next(chunks)  # under way
        refused = ask(server, "alice-secret", QUESTION)
        assert refused.status_code == 429, (refused.text, stats(server))
        assert refused.headers["retry-after"] == "1"
        error = refused.json()["error"]
        assert error["code"] == "rate_limit_exceeded" and set(error) == {
            "message", "type", "param", "code"}
    wait_until(lambda: stats(server)["alice"]["running"] == 0, what="the stream counted out",
               interval=0.1)   # the stream closed: counted out
    assert ask(server, "alice-secret", QUESTION).status_code == 200

    # Dave may use one token a minute: his first request passes, the next waits.
    assert ask(server, "dave-secret", QUESTION).status_code == 200
    limited = ask(server, "dave-secret", QUESTION)
    assert limited.status_code == 429 and limited.json()["error"]["type"] == "tokens"
    assert 1 <= int(limited.headers["retry-after"]) <= 60

    assert httpx.get(server.base + "/stats", headers=bearer("bob-secret")).status_code == 403
    users = stats(server)
    assert users["alice"]["requests"] == 2 and users["alice"]["refused"] == 1
    assert users["dave"]["refused"] == 1 and users["dave"]["tokens"] > 0


def stats(server: Server) -> dict:
    response = httpx.get(server.base + "/stats", headers=bearer("root-secret"), timeout=30)
    assert response.status_code == 200, response.text
    return response.json()["users"]


def test_share_prefix_shares_only_the_system_prompt(start_server, db_path, keys):
    server = start_server("--keys", keys, "--parallel", "1", "--share-prefix")
    alice = ask(server, "alice-secret", QUESTION).json()
    wait_for_kv(db_path, 1)   # the system prompt's KV, stored by the server's writer
    other = [QUESTION[0], {"role": "user", "content": "Name a fruit."}]
    bob = ask(server, "bob-secret", other).json()
    assert bob["chatdb"]["conversation_id"] != alice["chatdb"]["conversation_id"]
    assert bob["chatdb"]["reused_messages"] == 1    # the shared system prompt, nothing more
    assert bob["chatdb"]["restored_tokens"] > 0 and bob["chatdb"]["kv_source"] == "archive"
    # Alice's own question, sent by Bob: still only the system prompt is his to reuse.
    assert ask(server, "bob-secret", QUESTION).json()["chatdb"]["reused_messages"] == 1


@pytest.mark.parametrize("text, problem", [
    ("alice\n", "expected 'NAME KEY"),
    ("al ice secret x\n", "is not admin"),
    ("alice a\nalice b\n", "named twice"),
    ("# nobody\n", "names no user"),
])
def test_a_bad_keys_file_is_one_line_and_exit_2(tmp_path, db_path, text, problem):
    path = tmp_path / "keys"
    path.write_text(text)
    done = subprocess.run(chatdb_argv("serve", "--db", db_path, "--keys", path, "--port", "0"),
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and problem in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not db_path.exists()
