"""`chatdb index` and `chatdb search --by`, as real processes on a real archive file."""

import signal
import subprocess

import pytest

from chatdb.archive import Archive
from engine.embed.indexer import BATCH

from ..fts_segments import written_apart
from ..polling import wait_until

TOPICS = ["the write-ahead log of a database", "baking sourdough bread at home",
          "a train journey across the Alps", "tuning a guitar by ear", "the life cycle of frogs",
          "compiling a kernel module", "planting tomatoes in spring", "a chess opening"]


def fill(db_path, n: int) -> None:
    """n messages of a few sentences each, in conversations of ten."""
    with Archive.open(db_path) as archive, archive.transaction():
        conv = None
        for i in range(n):
            if i % 10 == 0:
                conv = archive.create_conversation(f"chat {i // 10}")
            topic = TOPICS[i % len(TOPICS)]
            archive.add_message(conv.id, "user" if i % 2 == 0 else "assistant",
                                f"Message {i} is about {topic}. " * 6)


def indexed(db_path) -> "tuple[int, int]":
    """(messages with vectors, vector rows for which another row has the same chunk)."""
    with Archive.open(db_path) as archive:
        done = archive.conn.execute(
            "SELECT count(DISTINCT message_id) FROM message_vectors").fetchone()[0]
        twice = archive.conn.execute(
            "SELECT count(*) - count(DISTINCT message_id || '/' || model_id || '/' || chunk) "
            "FROM message_vectors").fetchone()[0]
    return done, twice


def started(chatdb, *args):
    return subprocess.Popen(chatdb.argv("index", *args), cwd=chatdb.cwd, env=chatdb.env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.timeout(600)
def test_index_resumes_after_ctrl_c_and_kill_9(chatdb, db_path):
    n = 4 * BATCH   # a batch committed at each stop, and more left to carry on with
    fill(db_path, n)
    for stop in (signal.SIGINT, signal.SIGKILL):
        before = indexed(db_path)[0]
        proc = started(chatdb)
        try:
            wait_until(lambda: indexed(db_path)[0] > before, timeout=300,
                       what="a first batch committed")
        finally:
            proc.send_signal(stop)
            out, err = proc.communicate(timeout=120)
        if stop == signal.SIGINT:
            assert proc.returncode == 130, err
            assert "carries on" in err and "Traceback" not in err
        else:
            assert proc.returncode == -signal.SIGKILL
        done, twice = indexed(db_path)
        assert before < done < n and twice == 0
    report = chatdb("index", "--json").json()
    assert report["embedded"] == n - done and report["already"] == done
    assert indexed(db_path) == (n, 0)
    assert report["indexes"][0]["messages"] == n
    again = chatdb("index", "--json").json()
    assert again["embedded"] == 0 and again["already"] == n


def test_search_by_words_until_an_index_exists_then_both(chatdb, db_path, sample):
    query = ["itinerary", "for", "a", "holiday", "in", "japan"]  # not all in any message
    result = chatdb("search", *query)
    assert result.returncode == 0 and result.stdout == ""
    assert "no index by meaning" in result.stderr and "chatdb index" in result.stderr
    assert "chatdb index" in chatdb("search", *query, "--by", "meaning").error()
    assert chatdb("search", "lifetime", "--json").json()[0]["ranks"] == {"words": 1, "meaning": None}

    with Archive.open(db_path) as archive:
        n = archive.count_messages()
    assert chatdb("index", "--json").json()["embedded"] == n
    hits = chatdb("search", *query, "--json").json()
    assert hits and hits[0]["ranks"]["words"] is None and hits[0]["ranks"]["meaning"] == 1
    assert hits[0]["similarity"] > 0.2
    words = chatdb("search", "borrow", "--json", "--by", "words").json()
    both = chatdb("search", "borrow", "--json").json()
    assert [h["message_id"] for h in words] == [h["message_id"] for h in both][:len(words)]
    assert both[0]["ranks"]["words"] == 1 and both[0]["ranks"]["meaning"] is not None
    off = chatdb("search", *query, "--by", "meaning", "--embed-model", "off")
    assert "off" in off.error()


def test_index_merges_a_text_index_in_many_segments(chatdb, archive):
    written_apart(archive, [f"note {i}" for i in range(20)])
    merged = chatdb("index", "--json").json()["text_index"]
    assert merged["segments"] == 1 and merged["merge_steps"] >= 2
    assert chatdb("index", "--json").json()["text_index"] == {"segments": 1, "merge_steps": 0}
    assert len(chatdb("search", "note", "--by", "words", "--limit", "50", "--json").json()) == 20
