"""`chatdb ask` when a turn fails, is killed, or runs beside others on the same conversation.

Real processes on a real archive; afterwards the archive's tree is checked,
and a resumed answer must equal one recomputed on a copy (greedy).
"""

import json
import shutil
import signal
import subprocess

from chatdb.archive import Archive
from engine.chat import Engine
from engine.llama.sampling import SamplingSettings

from ..polling import wait_until

GREEDY = ("--temperature", "0", "--seed", "1", "--max-tokens", "12", "--ctx", "2048")
SAMPLING = SamplingSettings(temperature=0, seed=1, max_tokens=12)   # GREEDY, in process


def _state(db_path):
    with Archive.open(db_path) as archive:
        latest = archive.latest_conversation()
        return (archive.count_conversations(), archive.count_messages(),
                latest.id if latest else None, latest.head_id if latest else None)


def _same_answer_as_recomputed(chatdb, db_path, tmp_path, *args):
    """`ask ARGS` resumed from db_path's KV equals it with --no-kv on a copy."""
    copy = tmp_path / f"copy-{len(list(tmp_path.iterdir()))}.db"
    shutil.copy(db_path, copy)
    resumed = chatdb("ask", "--json", *GREEDY, *args).json()
    recomputed = chatdb("ask", "--json", "--no-kv", *GREEDY, *args, "--db", copy, db=False).json()
    assert resumed["text"] == recomputed["text"]
    return resumed


def test_a_failed_ask_leaves_nothing_and_ask_c_continues_the_real_chat(chatdb, db_path, tmp_path):
    first = chatdb("ask", "--json", *GREEDY, "Name a colour").json()
    before = _state(db_path)
    not_gguf = tmp_path / "notes.gguf"
    not_gguf.write_text("not a model")
    long_text = "word " * 3000
    failures = [
        ("ask", *GREEDY, "--model", tmp_path / "missing.gguf", "Hello"),
        ("ask", *GREEDY, "--model", not_gguf, "Hello"),
        ("ask", *GREEDY, "-c", "--model", not_gguf, "Hello"),
        ("ask", *GREEDY, "--fork-from", first["message_id"], "--model", not_gguf, "Hello"),
        ("ask", *GREEDY, long_text),
        ("ask", *GREEDY, "-c", long_text),
    ]
    for argv in failures:
        line = chatdb(*argv).error(1)
        assert "Traceback" not in line
        assert _state(db_path) == before, argv[:6]
    resumed = _same_answer_as_recomputed(chatdb, db_path, tmp_path, "-c", "And a fruit?")
    assert resumed["conversation_id"] == first["conversation_id"]
    assert resumed["kv"]["source"] == "archive"


def _question(db_path, text):
    if not db_path.exists():
        return None
    try:
        with Archive.open(db_path) as archive:
            row = archive.conn.execute(
                "SELECT id FROM messages WHERE role = 'user' AND content = ?", (text,)).fetchone()
    except Exception:  # the archive is being created
        return None
    return row[0] if row else None


def test_a_kill_during_model_load_keeps_the_question(chatdb, db_path, tmp_path):
    chatdb("ask", "--json", *GREEDY, "Name a colour").json()
    process = subprocess.Popen(chatdb.argv("ask", *GREEDY, "-c", "Remember the word kiwi"),
                               cwd=chatdb.cwd, env=chatdb.env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        question = wait_until(lambda: _question(db_path, "Remember the word kiwi"), what="the question")
        process.send_signal(signal.SIGKILL)
        process.wait(30)
    finally:
        process.kill()
    with Archive.open(db_path) as archive:
        assert archive.children(question) == []
        conv = archive.latest_conversation()
        assert conv.head_id == question
        assert [m.role for m in archive.messages(conv.id)] == ["user", "assistant", "user"]
    # The next question is a sibling of the unanswered one, answered as a recomputed copy is.
    resumed = _same_answer_as_recomputed(chatdb, db_path, tmp_path, "-c", "And a fruit?")
    with Archive.open(db_path) as archive:
        asked = archive.message(resumed["user_message_id"])
        assert asked.parent_id == archive.message(question).parent_id
        assert archive.message(question).content == "Remember the word kiwi"


def test_four_concurrent_asks_on_one_conversation_become_sibling_branches(chatdb, db_path, tmp_path):
    first = chatdb("ask", "--json", *GREEDY, "Name a colour").json()
    questions = [f"Name an animal that starts with {letter}" for letter in "BCDF"]
    processes = [subprocess.Popen(chatdb.argv("ask", "--json", *GREEDY, "-c", q), cwd=chatdb.cwd,
                                  env=chatdb.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for q in questions]
    results = []
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        results.append(json.loads(out))
    with Archive.open(db_path) as archive:
        siblings = archive.children(first["message_id"])
        assert sorted(m.content for m in siblings) == sorted(questions)
        for result in results:
            answers = archive.children(result["user_message_id"])
            assert [a.id for a in answers] == [result["message_id"]]
            assert archive.message(result["user_message_id"]).parent_id == first["message_id"]
        assert archive.conversation(first["conversation_id"]).head_id in {
            r["message_id"] for r in results}
    # Every branch's stored KV matches its path: continuing any of them from the archive
    # answers as recomputing it does (on a copy, without KV). One engine each, in this
    # process: the processes' part is done.
    copy = tmp_path / "copy.db"
    shutil.copy(db_path, copy)
    with Archive.open(db_path) as archive, Archive.open(copy) as other:
        resuming = Engine.open(archive, sampling=SAMPLING, draft="off", n_ctx=2048)
        recomputing = Engine.open(other, sampling=SAMPLING, draft="off", n_ctx=2048, use_kv=False)
        try:
            for result in results:
                fork = archive.fork(result["message_id"]).id
                resumed = resuming.reply(fork, "Is it big?")
                assert resumed.kv_source == "archive" and resumed.restored_tokens > 0
                assert resumed.text == recomputing.reply(other.fork(result["message_id"]).id,
                                                         "Is it big?").text
        finally:
            resuming.close()
            recomputing.close()
