"""Several requests at once share the model; a client that leaves stops only its own answer."""

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from chatdb.archive import Archive

from ..polling import wait_until

QUESTIONS = ["Name a colour.", "What is tea?", "Say hello in French.", "Name a planet."]
LONG = "Count from one to one hundred, one number per line."


def ask(server, question):
    reply = server.chat([{"role": "user", "content": question}], max_tokens=8)
    return reply["choices"][0]["message"]["content"]


@pytest.mark.parametrize("clients", [2, 4])
def test_concurrent_requests_each_get_the_greedy_text_they_get_alone(start_server, tmp_path, clients):
    server = start_server("--parallel", clients, db=tmp_path / "together.db")
    questions = QUESTIONS[:clients]
    with ThreadPoolExecutor(clients) as pool:
        together = list(pool.map(lambda q: ask(server, q), questions))
    alone_server = start_server("--parallel", 1, db=tmp_path / "alone.db")
    alone = [ask(alone_server, q) for q in questions]
    assert together == alone
    with Archive.open(tmp_path / "together.db") as archive:
        assert archive.count_conversations() == clients   # each its own, none chained to another
        for conv in archive.list_conversations():
            assert [m.role for m in archive.messages(conv.id)][-2:] == ["user", "assistant"]


def test_a_client_that_disconnects_keeps_an_interrupted_answer(start_server, db_path):
    server = start_server("--parallel", 2)
    body = {"model": "m", "messages": [{"role": "user", "content": LONG}], "max_tokens": 400,
            "temperature": 0, "stream": True}
    received = []
    with httpx.stream("POST", server.root + "/v1/chat/completions", json=body, timeout=600) as response:
        for line in response.iter_lines():
            if line.startswith("data: {"):
                delta = json.loads(line[6:])["choices"][0]["delta"]
                received.append(delta.get("content", ""))
            if len(received) >= 4:
                break                                    # and close the connection

    def interrupted():
        with Archive.open(db_path) as archive:
            answers = [m for m in archive.tree(1) if m.role == "assistant"]
            return answers if answers and answers[0].status == "interrupted" else None
    (answer,) = wait_until(interrupted, timeout=600, what="the interrupted answer", interval=0.1)
    assert answer.content.startswith("".join(received))
    assert answer.meta["finish"] == "cancelled"
    # The server goes on serving.
    assert ask(server, "Name a colour.")
