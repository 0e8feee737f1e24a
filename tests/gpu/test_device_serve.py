"""`chatdb serve --parallel 4` on the device: four clients at once, each answer batched with
the others, equal to its answer alone, and stored (the CPU suite's check, shorter answers:
tests/server/test_concurrency.py)."""

from concurrent.futures import ThreadPoolExecutor

import httpx

from chatdb.archive import Archive

from ..server.test_concurrency import LONG, QUESTIONS, Streamed, ask, text, user
from .conftest import SHORT

CLIENTS = 4


def test_four_clients_at_once_on_the_device_each_get_their_answer_alone(start_server, tmp_path):
    server = start_server("--parallel", CLIENTS, db=tmp_path / "together.db")
    long = Streamed(server, user(LONG), max_tokens=4 * SHORT)
    assert long.first.wait(600)                # decoding: the others join its batch
    with ThreadPoolExecutor(CLIENTS - 1) as pool:
        replies = list(pool.map(lambda q: ask(server, user(q), SHORT), QUESTIONS[:CLIENTS - 1]))
    together = [long.result()] + [text(r) for r in replies]
    assert long.final["chatdb"]["batch"]["most_sequences"] == CLIENTS
    server.stop()

    alone_server = start_server("--parallel", 1, db=tmp_path / "alone.db")
    alone = [text(alone_server.chat(user(LONG), max_tokens=4 * SHORT))]
    alone += [text(ask(alone_server, user(q), SHORT)) for q in QUESTIONS[:CLIENTS - 1]]
    assert httpx.get(alone_server.root + "/health").json()["most_sequences"] == 1
    assert together == alone
    with Archive.open(tmp_path / "together.db") as archive:
        assert archive.count_conversations() == CLIENTS
        for conv in archive.list_conversations():
            assert [m.role for m in archive.messages(conv.id)][-2:] == ["user", "assistant"]
