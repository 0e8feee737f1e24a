"""Several requests at once share the model by continuous batching; a client that leaves
stops only its own answer; the archive and its KV stay whole.

Batching is proven by what the server reports (each answer's `chatdb.batch`, and
/health's `most_sequences`), never by timings.
"""

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx

from chatdb.archive import Archive

from ..polling import wait_until
from .conftest import chatdb_json

QUESTIONS = ["Name a colour.", "What is tea?", "Say hello in French."]
LONG = "Write a very long story about a dragon who learns to fly, with many chapters."
BODY = {"model": "m", "temperature": 0}


def user(text):
    return [{"role": "user", "content": text}]


class Streamed:
    """A streamed completion read on its own thread; `first` is set at its first text."""

    def __init__(self, server, messages, max_tokens, stop_after=None):
        self.server, self.messages, self.max_tokens = server, messages, max_tokens
        self.stop_after = stop_after            # chunks read before hanging up (None: all)
        self.text, self.final, self.first = [], None, threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        body = {**BODY, "messages": self.messages, "max_tokens": self.max_tokens, "stream": True,
                "stream_options": {"include_usage": True}}
        with httpx.stream("POST", self.server.root + "/v1/chat/completions", json=body,
                          timeout=600) as response:
            for line in response.iter_lines():
                if not line.startswith("data: {"):
                    continue
                chunk = json.loads(line[6:])
                if chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
                    self.text.append(chunk["choices"][0]["delta"]["content"])
                    self.first.set()
                if "usage" in chunk:
                    self.final = chunk
                if self.stop_after is not None and len(self.text) >= self.stop_after:
                    break                        # and close the connection
        self.first.set()

    def result(self) -> str:
        self.thread.join(600)
        assert not self.thread.is_alive()
        return "".join(self.text)


def ask(server, messages, max_tokens=16) -> dict:
    return server.chat(messages, max_tokens=max_tokens)


def text(reply) -> str:
    return reply["choices"][0]["message"]["content"]


def test_concurrent_requests_are_batched_and_each_gets_the_greedy_text_it_gets_alone(
        start_server, tmp_path):
    clients = 4   # (2 proved nothing that 4 does not: the other tests here batch 2)
    server = start_server("--parallel", clients, db=tmp_path / "together.db")
    long = Streamed(server, user(LONG), max_tokens=200)
    assert long.first.wait(600)                # decoding: the others join its batch
    with ThreadPoolExecutor(clients - 1) as pool:
        replies = list(pool.map(lambda q: ask(server, user(q)), QUESTIONS[:clients - 1]))
    together = [long.result()] + [text(r) for r in replies]
    for reply in replies:                     # each shared its passes with the long answer
        assert reply["chatdb"]["batch"]["most_sequences"] >= 2
    assert long.final["chatdb"]["batch"]["most_sequences"] == clients
    assert httpx.get(server.root + "/health").json()["most_sequences"] == clients
    server.stop()

    alone_server = start_server("--parallel", 1, db=tmp_path / "alone.db")
    alone = [text(alone_server.chat(user(LONG), max_tokens=200))]
    alone += [text(ask(alone_server, user(q))) for q in QUESTIONS[:clients - 1]]
    assert httpx.get(alone_server.root + "/health").json()["most_sequences"] == 1
    assert together == alone
    with Archive.open(tmp_path / "together.db") as archive:
        assert archive.count_conversations() == clients   # each its own, none chained to another
        for conv in archive.list_conversations():
            assert [m.role for m in archive.messages(conv.id)][-2:] == ["user", "assistant"]


def test_a_long_prompt_is_read_in_chunks_alongside_a_running_answer(start_server):
    server = start_server("--parallel", 2)
    long = Streamed(server, user(LONG), max_tokens=300)
    assert long.first.wait(600)
    prompt = "Here are some notes about rivers. " * 80 + "Summarise them in one line."
    reply = ask(server, user(prompt), max_tokens=8)
    batch = reply["chatdb"]["batch"]
    # Read over several passes, every one of them also decoding the running answer. (How
    # many is the prefill pace's choice from the step timings: tests/engine/test_slots.py
    # and test_prefill_pace.py check the chunks.)
    assert reply["usage"]["prompt_tokens"] > 4 * 128
    assert batch["prompt_passes"] >= 2
    assert batch["prompt_least_sequences"] == 2
    long.result()
    alone = server.chat(user(prompt), max_tokens=8)   # a resend: restored live, not recomputed
    assert text(alone) == text(reply)


def test_a_client_that_disconnects_keeps_an_interrupted_answer_and_the_others_go_on(
        start_server, db_path):
    server = start_server("--parallel", 2)
    other = Streamed(server, user("Name three planets."), max_tokens=96)
    assert other.first.wait(600)
    gone = Streamed(server, user(LONG), max_tokens=400, stop_after=4)
    received = gone.result()

    def interrupted():
        with Archive.open(db_path) as archive:
            for conv in archive.list_conversations():
                answers = [m for m in archive.messages(conv.id) if m.role == "assistant"]
                if answers and answers[0].status == "interrupted":
                    return answers[0]
        return None
    answer = wait_until(interrupted, timeout=600, what="the interrupted answer", interval=0.1)
    assert answer.content.startswith(received)
    assert answer.meta["finish"] == "cancelled"
    finished = other.result()
    assert other.final["choices"] == [] and finished
    server.stop()
    alone = start_server("--parallel", 1, db=db_path.with_name("alone.db"))
    assert text(ask(alone, user("Name three planets."), max_tokens=96)) == finished


def test_after_concurrent_turns_the_archive_is_whole_and_a_restarted_server_restores_each(
        start_server, db_path):
    server = start_server("--parallel", 3)
    with ThreadPoolExecutor(3) as pool:
        first = list(pool.map(lambda q: ask(server, user(q)), QUESTIONS))
    assert server.stop() == 0
    with Archive.open(db_path) as archive:
        assert archive.integrity_check() == "ok"
    for reply in first:
        shown = chatdb_json(db_path, "show", reply["chatdb"]["conversation_id"])
        assert [m["role"] for m in shown["messages"]] == ["user", "assistant"]

    again = start_server("--parallel", 3)
    for question, reply in zip(QUESTIONS, first):
        messages = user(question) + [{"role": "assistant", "content": text(reply)}] + user("Why?")
        follow = ask(again, messages, max_tokens=4)
        assert follow["chatdb"]["conversation_id"] == reply["chatdb"]["conversation_id"]
        assert follow["chatdb"]["kv_source"] == "archive"
        # Everything up to the new question was restored: only it and the opening are computed.
        cached = follow["usage"]["prompt_tokens_details"]["cached_tokens"]
        assert follow["usage"]["prompt_tokens"] - cached < 16
