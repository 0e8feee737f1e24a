"""Raw HTTP against a real server: keys, bad bodies, size limits, a full queue, no tracebacks."""

import json
import os
import stat
import subprocess

import httpx
import pytest

from ..chatdb_command import chatdb_argv, python_path
from .conftest import ROOT, Server

KEY = "s3cret-key"
OK_BODY = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2,
           "temperature": 0}


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    server = Server(tmp_path_factory.mktemp("keyed") / "chatdb.db", "--max-body", "20000",
                    env={"CHATDB_API_KEY": KEY})
    yield server
    server.stop()


def auth(key=KEY):
    return {"authorization": f"Bearer {key}"}


def error_of(response, status):
    assert response.status_code == status, response.text
    assert "Traceback" not in response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    return error


def test_a_missing_or_wrong_key_is_401(keyed):
    assert error_of(keyed.post("/v1/chat/completions", OK_BODY), 401)["type"] == "authentication_error"
    error_of(keyed.post("/v1/chat/completions", OK_BODY, headers=auth("s3cret-kez")), 401)
    error_of(httpx.get(keyed.root + "/v1/models", timeout=120), 401)
    assert httpx.get(keyed.root + "/v1/models", headers=auth(), timeout=120).status_code == 200
    assert keyed.post("/v1/chat/completions", OK_BODY, headers=auth()).status_code == 200


@pytest.mark.parametrize("body, param", [
    (b'{"messages": [', None),
    (b'\xff\xfe not json', None),
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
    ({**OK_BODY, "n": 9}, "n"),
    ({**OK_BODY, "tools": [{"type": "function", "function": {"name": "f g"}}]}, "tools[0].function.name"),
    ({"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]},
     "messages[0].content[0]"),
    ({**OK_BODY, "temperature": "hot"}, "temperature"),
    ({**OK_BODY, "max_tokens": 0}, "max_tokens"),
    ({**OK_BODY, "stop": [1]}, "stop"),
])
def test_bad_bodies_get_a_400_naming_the_field(keyed, body, param):
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    error = error_of(keyed.post("/v1/chat/completions", content=content,
                                headers={**auth(), "content-type": "application/json"}), 400)
    assert error["type"] == "invalid_request_error" and error["param"] == param


def test_text_parts_are_joined(keyed):
    body = {**OK_BODY, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "Hi"}, {"type": "text", "text": " there"}]}]}
    assert keyed.post("/v1/chat/completions", body, headers=auth()).status_code == 200


def test_an_oversized_body_is_413(keyed):
    big = {**OK_BODY, "messages": [{"role": "user", "content": "x" * 30000}]}
    assert error_of(keyed.post("/v1/chat/completions", big, headers=auth()), 413)["code"] == "request_too_large"

    def chunks():  # no Content-Length: the limit holds while the body is read
        yield json.dumps(big).encode()
    response = httpx.post(keyed.root + "/v1/chat/completions", content=chunks(),
                          headers=auth(), timeout=120)
    error_of(response, 413)


def test_unknown_routes_are_openai_shaped(keyed):
    error_of(httpx.get(keyed.root + "/v1/nothing", headers=auth(), timeout=120), 404)
    error_of(httpx.get(keyed.root + "/v1/chat/completions", headers=auth(), timeout=120), 405)


def test_the_archive_is_private(keyed):
    assert stat.S_IMODE(os.stat(keyed.db).st_mode) == 0o600


def test_a_full_queue_is_503_with_retry_after(start_server):
    server = start_server("--parallel", "1", "--queue", "0")
    # Long enough to be still answering when the second request comes (the
    # model may end "count to a hundred" early on a fast machine).
    long = {**OK_BODY, "messages": [{"role": "user", "content":
                                     "Write a very long essay about the history of ships."}],
            "max_tokens": 2000, "stream": True}
    with httpx.stream("POST", server.root + "/v1/chat/completions", json=long, timeout=600) as held:
        assert held.status_code == 200
        # The first token: the slot is busy. The iterator is kept: a dropped one is
        # closed when collected, and closes the connection (the server then cancels).
        lines = held.iter_lines()
        next(lines)
        refused = server.post("/v1/chat/completions", OK_BODY)
        error = error_of(refused, 503)
        assert error["code"] == "server_busy" and int(refused.headers["retry-after"]) >= 1


def test_another_address_without_a_key_is_refused(db_path):
    env = {k: v for k, v in os.environ.items() if k != "CHATDB_API_KEY"}
    done = subprocess.run(chatdb_argv("serve", "--host", "0.0.0.0", "--db", db_path), cwd=ROOT,
                          env={**env, "PYTHONPATH": python_path(env)},
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 2
    assert done.stderr.startswith("chatdb: error: --host 0.0.0.0") and len(done.stderr.splitlines()) == 1
    assert not db_path.exists()
