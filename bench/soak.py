"""A soak: 8 clients of mixed requests against `chatdb serve --parallel 4` for a while.

Each client loops, for --minutes, over plain chats that resend a growing
conversation, streamed chats, chats with a tool to call, n = 2, streams
cancelled after their first chunks, and a new connection for every request
(reconnects) or one kept alive. The server's resident memory and open files
are read at the start (the baseline: after one round of every kind and a
quarter of the time, so that the states of recent chats it keeps in memory,
up to engine/kv/memory_states.MEMORY_BUDGET, have mostly filled), half way
through the rest, and at the end; errors are every response but a 200 (a 503 from a full queue
counts too) and every exception. Every answer that finished is then looked
for in the archive: its message id, with its text.

    PYTHONPATH=$PWD .venv/bin/python bench/soak.py --minutes 20    # the issue's figure
    PYTHONPATH=$PWD .venv/bin/python bench/soak.py --minutes 2     # a short one

Goals: growth of RSS and open files <= 5 %, 0 errors, every finished answer stored. RSS is
also shown less the states of recent chats the server keeps in memory by design (up to
engine/kv/memory_states.MEMORY_BUDGET, 1 GiB; /v1/stats says how much): a short run
is still filling that cache, and the goal is judged on the rest.
"""

import argparse
import json
import os
import random
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_clients import chatdb_server  # noqa: E402

CLIENTS, PARALLEL = 8, 4
TOOL = {"type": "function", "function": {"name": "weather", "description": "the weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}
TOPICS = ("rivers", "tea", "bridges", "owls", "clocks", "salt", "maps", "bees")
KINDS = ("chat", "stream", "tools", "n2", "cancel")


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.errors: list[str] = []
        self.stored: dict[int, str] = {}     # message id -> text of answers that finished
        self.done = {kind: 0 for kind in KINDS}

    def error(self, what: str) -> None:
        with self.lock:
            self.errors.append(what)

    def finished(self, kind: str, answers) -> None:
        with self.lock:
            self.done[kind] += 1
            self.stored.update(answers)


def process_figures(server) -> tuple[int, int, int]:
    """(resident bytes, open files, resident bytes less the chats' states the server keeps
    in memory by design, up to its budget) of the server process."""
    pid = server.proc.pid
    status = Path(f"/proc/{pid}/status").read_text()
    rss = next(int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmRSS:"))
    kept = httpx.get(server.base + "/v1/stats", timeout=60).json()["memory_states_bytes"]
    return rss, len(os.listdir(f"/proc/{pid}/fd")), rss - kept


def chat(http, base, body, kind, tally):
    response = http.post(base + "/v1/chat/completions", json=body, timeout=600)
    if response.status_code != 200:
        return tally.error(f"{kind}: {response.status_code} {response.text[:120]}")
    answer = response.json()
    ids = answer["chatdb"].get("message_ids") or [answer["chatdb"]["message_id"]]
    texts = [c["message"]["content"] for c in answer["choices"]]
    calls = [bool(c["message"].get("tool_calls")) for c in answer["choices"]]
    tally.finished(kind, {i: t for i, t, called in zip(ids, texts, calls) if not called})
    return texts[0]


def stream(http, base, body, kind, tally, cancel: bool):
    body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    text, fields = "", None
    with http.stream("POST", base + "/v1/chat/completions", json=body, timeout=600) as response:
        if response.status_code != 200:
            return tally.error(f"{kind}: {response.status_code}")
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if "error" in chunk:
                return tally.error(f"{kind}: {chunk['error']['message'][:120]}")
            for choice in chunk.get("choices", []):
                text += choice["delta"].get("content") or ""
            fields = chunk.get("chatdb", fields)
            if cancel and len(text) > 8:
                tally.finished(kind, {})   # cut off: kept as interrupted, not compared
                return text
    if fields is None:
        return tally.error(f"{kind}: no usage chunk")
    tally.finished(kind, {fields["message_id"]: text})
    return text


def client(number: int, base: str, until: float, tally: Tally, rounds: "int | None",
           kinds=KINDS) -> None:
    rng, topic = random.Random(number), TOPICS[number % len(TOPICS)]
    messages = [{"role": "system", "content": f"You talk about {topic}."}]
    kept = httpx.Client()
    turn = 0
    while (rounds is None and time.monotonic() < until) or (rounds is not None and turn < rounds * len(kinds)):
        kind = kinds[turn % len(kinds)] if rounds is not None else rng.choice(kinds)
        http = kept if rng.random() < 0.5 else httpx.Client()   # else a reconnect
        ask = messages + [{"role": "user", "content": f"Turn {turn}: tell me about {topic}."}]
        body = {"model": "any", "messages": ask, "max_tokens": 24, "temperature": 0.7, "seed": turn}
        try:
            if kind == "chat":
                answer = chat(http, base, body, kind, tally)
                if answer is not None and len(messages) < 12:
                    messages = ask + [{"role": "assistant", "content": answer}]
            elif kind == "tools":
                chat(http, base, {**body, "tools": [TOOL]}, kind, tally)
            elif kind == "n2":
                chat(http, base, {**body, "n": 2}, kind, tally)
            else:
                stream(http, base, body, kind, tally, cancel=kind == "cancel")
        except (httpx.HTTPError, KeyError, ValueError) as exc:
            tally.error(f"{kind}: {type(exc).__name__}: {exc}")
        finally:
            if http is not kept:
                http.close()
        turn += 1
    kept.close()


def run_clients(base: str, seconds: float, tally: Tally, rounds=None, kinds=KINDS) -> None:
    until = time.monotonic() + seconds
    threads = [threading.Thread(target=client, args=(i, base, until, tally, rounds, kinds))
               for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def missing_answers(db: Path, stored: dict) -> list[int]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        found = dict(conn.execute("SELECT id, content FROM messages WHERE id IN "
                                  "(SELECT value FROM json_each(?))", (json.dumps(list(stored)),)))
    return [i for i, text in stored.items() if found.get(i) != text]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=20.0, help="how long (default 20)")
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help=f"the requests sent, some of {','.join(KINDS)} (default: all)")
    args = parser.parse_args(argv)
    kinds = tuple(args.kinds.split(","))
    if not set(kinds) <= set(KINDS):
        parser.error(f"--kinds: some of {','.join(KINDS)}")
    work = Path(tempfile.mkdtemp(prefix="chatdb-soak-"))
    db = work / "soak.db"
    with chatdb_server(db, work, parallel=PARALLEL, extra=("--draft", "off", "--embed-model", "off",
                                                            "--ctx", "2048")) as server:
        tally = Tally()
        run_clients(server.base, 0, tally, 1, kinds)       # warm: every kind once per client
        run_clients(server.base, args.minutes * 15, tally, None, kinds)
        start, started = process_figures(server), time.monotonic()
        run_clients(server.base, args.minutes * 30, tally, None, kinds)
        mid = process_figures(server)
        run_clients(server.base, args.minutes * 30, tally, None, kinds)
        end, took = process_figures(server), time.monotonic() - started
    missing = missing_answers(db, tally.stored)
    report(start, mid, end, took, tally, missing)
    ok = not tally.errors and not missing and all(e <= s * 1.05 for s, e in zip(start[1:], end[1:]))
    return 0 if ok else 1


def report(start, mid, end, took, tally, missing) -> None:
    print(f"soak: {CLIENTS} clients, --parallel {PARALLEL}, {took / 60:.1f} minutes measured "
          f"(after a quarter as much to warm); requests done by kind: {tally.done}")
    print(f"{'figure':<20}{'start':>10}{'mid':>10}{'end':>10}{'end/start':>11}{'end/mid':>9}  goal")
    for name, s, m, e in (("RSS (MiB)", start[0] / 2**20, mid[0] / 2**20, end[0] / 2**20),
                          ("RSS less states", start[2] / 2**20, mid[2] / 2**20, end[2] / 2**20),
                          ("open files", start[1], mid[1], end[1])):
        print(f"{name:<20}{s:>10.1f}{m:>10.1f}{e:>10.1f}{e / s:>11.3f}{e / m:>9.3f}  <= 1.05")
    print(f"{'errors':<20}{'':>30}{len(tally.errors):>11}  0")
    print(f"{'answers not stored':<20}{'of ' + str(len(tally.stored)):>30}{len(missing):>11}  0")
    for line in tally.errors[:10]:
        print("  error:", line)


if __name__ == "__main__":
    sys.exit(main())
