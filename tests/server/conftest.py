"""A real `chatdb serve` process on a real archive file and the default model."""

import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from ..chatdb_command import chatdb_argv, python_path

ROOT = Path(__file__).resolve().parents[2]
READY = re.compile(r"serving .* on (http://[^ ]+/v1)")


class Server:
    """`chatdb serve --port 0` in its own process; `base` is its /v1 URL once ready."""

    def __init__(self, db: Path, *args, env=None, timeout: float = 300):
        self.db = db
        inherited = {k: v for k, v in os.environ.items() if k != "CHATDB_API_KEY"}
        self.env = {**inherited, "PYTHONPATH": python_path(), **(env or {})}
        argv = chatdb_argv("serve", "--db", db, "--port", "0", "--ctx", "4096", *args)
        self.proc = subprocess.Popen(argv, cwd=ROOT, env=self.env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: "queue.Queue[str | None]" = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.base = self._wait_ready(timeout)
        self.root = self.base[: -len("/v1")]

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.stderr.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def _wait_ready(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                raise AssertionError(f"chatdb serve exited {self.proc.wait()}: {''.join(self.stderr)}")
            if match := READY.search(line):
                return match[1]
        self.proc.kill()
        raise AssertionError(f"chatdb serve not ready in {timeout} s: {''.join(self.stderr)}")

    def post(self, path: str, body=None, *, content=None, headers=None, timeout=600) -> httpx.Response:
        return httpx.post(self.root + path, json=body, content=content, headers=headers,
                          timeout=timeout)

    def chat(self, messages, **fields) -> dict:
        """A non-streamed greedy completion (raw HTTP), asserted 200."""
        body = {"model": "any", "messages": messages, "temperature": 0, "max_tokens": 24, **fields}
        response = self.post("/v1/chat/completions", body)
        assert response.status_code == 200, response.text
        return response.json()

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM, as a service manager would; the KV of finished answers is stored first."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("chatdb serve did not stop on SIGTERM")


@pytest.fixture
def start_server(db_path):
    """start_server(*args) -> Server on the test's archive; stopped at the end."""
    started = []

    def start(*args, db=None, env=None):
        server = Server(db or db_path, *args, env=env)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def chatdb_json(db: Path, *args):
    """The JSON a `chatdb ... --json` command prints for the archive."""
    env = {**os.environ, "PYTHONPATH": python_path()}
    done = subprocess.run(chatdb_argv(*args, "--db", db, "--json"),
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
