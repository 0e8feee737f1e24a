"""The servers bench/serve.py compares, and the streaming client that loads them.

A Proc is a server process on a free loopback port, ready once its health
route answers. `stream_chat` sends one streamed chat completion and times
its first and last content tokens.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
READY_S = 600        # a crowded 2-core machine can take minutes to load a model


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Proc:
    """A server process; ready once GET `health` answers 200. Its log goes to workdir."""

    def __init__(self, name: str, argv, health: str, workdir: Path, env=None):
        self.port = free_port()
        argv = [a.replace("{port}", str(self.port)) for a in argv]
        self.name, self.base, self.health = name, f"http://127.0.0.1:{self.port}", health
        self.log = open(workdir / f"{name}-{self.port}.log", "w")
        self.proc = subprocess.Popen(argv, cwd=workdir, env={**os.environ, **(env or {})},
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + READY_S
        while not self._ready():
            if self.proc.poll() is not None:
                raise RuntimeError(f"{name} exited {self.proc.returncode}; see {self.log.name}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{name} not ready in {READY_S} s; see {self.log.name}")
            time.sleep(0.2)

    def _ready(self) -> bool:
        try:
            return httpx.get(self.base + self.health, timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # chatdb stores finished answers' KV first
            try:
                self.proc.wait(timeout=300)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def chatdb_server(db: Path, workdir: Path, parallel: int = 4, threads=None, extra=()) -> Proc:
    """`chatdb serve` on `db`; `extra`: more of its options (--draft off, say)."""
    argv = [sys.executable, "-m", "cli.main", "serve", "--db", str(db), "--port", "{port}",
            "--parallel", str(parallel), "--queue", "64", *extra]
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {"PYTHONPATH": path, **({"CHATDB_THREADS": str(threads)} if threads else {})}
    return Proc("chatdb", argv, "/health", workdir, env)


def lcp_server(model: str, workdir: Path, deps: str, threads, disk_cache=False, ctx=8192) -> Proc:
    """llama-cpp-python's own server; its disk cache goes to workdir/.cache/llama_cache.

    interrupt_requests is off: by default a new request cuts off the one
    streaming, which no client under load wants.
    """
    decode, batch = threads
    argv = [sys.executable, "-m", "llama_cpp.server", "--model", model, "--port", "{port}",
            "--n_ctx", str(ctx), "--n_threads", str(decode), "--n_threads_batch", str(batch),
            "--interrupt_requests", "false", "--verbose", "false"]
    if disk_cache:
        argv += ["--cache", "true", "--cache_type", "disk", "--cache_size", str(8 << 30)]
    return Proc("lcp-disk" if disk_cache else "lcp", argv, "/v1/models", workdir,
                 {"PYTHONPATH": deps})


def llama_server(binary: str, model: str, workdir: Path, parallel: int, threads) -> Proc:
    """llama.cpp's llama-server, `parallel` slots of 1,024 tokens each."""
    decode, batch = threads
    argv = [binary, "-m", model, "--host", "127.0.0.1", "--port", "{port}", "-np", str(parallel),
            "-c", str(1024 * parallel), "-t", str(decode), "-tb", str(batch), "-fa", "off"]
    return Proc("llama-server", argv, "/health", workdir)


@dataclass
class Timed:
    ttft: float               # seconds from sending to the first content token
    tokens: int               # completion tokens (from usage, else content chunks)
    first_at: float           # perf_counter() at the first and the last content token
    last_at: float
    cached: int = 0           # prompt tokens the server reports as cached
    text: str = ""
    prompt: int = 0           # prompt tokens, from usage
    speculative: "dict | None" = None   # chatdb serve's drafting figures (chatdb.speculative)

    @property
    def decoded(self) -> int:
        return max(0, self.tokens - 1)   # the first token comes from the prompt's pass


def stream_chat(base: str, messages, max_tokens: int, start: "threading.Barrier | None" = None,
                timeout: float = 3600) -> Timed:
    """One streamed completion; with `start`, sent once every client at that barrier is ready."""
    body = {"model": "local", "messages": messages, "max_tokens": max_tokens, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}
    # Plain HTTP to loopback: no certificate store to load. Loading it took about 50 ms of
    # CPU per client, which chatdb serve, reading the free cores just before the batch,
    # took for another process's load (and chose fewer threads for the batch), and
    # which added 150-300 ms to the TTFT under load when it was inside the timed window.
    client = httpx.Client(timeout=timeout, verify=False)
    if start is not None:
        start.wait()
    started = time.perf_counter()
    first = last = None
    chunks, usage, text, fields = 0, None, [], {}
    with client, client.stream("POST", base + "/v1/chat/completions", json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            event = json.loads(line[6:])
            usage = event.get("usage") or usage
            fields = event.get("chatdb") or fields
            for choice in event.get("choices") or []:
                if (choice.get("delta") or {}).get("content"):
                    now = time.perf_counter()
                    text.append(choice["delta"]["content"])
                    first, last, chunks = first or now, now, chunks + 1
    first = first or time.perf_counter()
    tokens = usage["completion_tokens"] if usage else chunks
    cached = ((usage or {}).get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return Timed(first - started, tokens, first, last or first, cached, "".join(text),
                 (usage or {}).get("prompt_tokens", 0), fields.get("speculative"))


def concurrent(base: str, conversations, max_tokens: int) -> "list[Timed]":
    """Every conversation sent at once: each client thread waits for the others before
    it sends (thread start-up alone spread the arrivals over tens of ms)."""
    start = threading.Barrier(len(conversations))
    with ThreadPoolExecutor(len(conversations)) as pool:
        return list(pool.map(lambda m: stream_chat(base, m, max_tokens, start), conversations))


def one_at_a_time(base: str, conversations, max_tokens: int) -> "list[Timed]":
    return [stream_chat(base, m, max_tokens) for m in conversations]


def together_rate(timed) -> float:
    """Decoded tokens of all clients over the window from the first first token to the last token."""
    window = max(t.last_at for t in timed) - min(t.first_at for t in timed)
    return sum(t.decoded for t in timed) / window if window > 0 else 0.0


def serial_rate(timed) -> float:
    """Decoded tokens over the time spent decoding them, one request after another."""
    spent = sum(t.last_at - t.first_at for t in timed)
    return sum(t.decoded for t in timed) / spent if spent > 0 else 0.0


def chatdb_threads(base: str) -> "tuple[int, int]":
    """The decode and batch threads chatdb serve chose for its last batch (/health)."""
    threads = httpx.get(base + "/health").json()["threads"]
    return threads["decode"], threads["batch"]


def settle(base: str, idle_s: float = 0.5) -> None:
    """An idle pause, a one-token turn, another pause: chatdb then reads its free cores
    over a quiet window, not over whatever the bench ran before."""
    time.sleep(idle_s)
    stream_chat(base, [{"role": "user", "content": "Hi"}], 1)
    time.sleep(idle_s)


def disk_bytes(*paths: Path) -> int:
    total = 0
    for path in paths:
        if path.is_file():
            total += path.stat().st_size
        elif path.is_dir():
            total += sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return total
