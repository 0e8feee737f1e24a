"""Turns on the device: resumed from the archive in a new process, forked, retried, after a
KV budget drop, with f16 KV (flash attention on, as on any GPU) and q8_0 KV.

The checks are the CPU suite's own (imported here: each runs on the device, its own run
the reference) and /retry through the console's stdin mode.
"""

import os
import subprocess

from chatdb.archive import Archive

from ..chatdb_command import chatdb_argv, python_path
from ..engine.test_kv_budget import (  # noqa: F401
    bounded, test_a_chat_whose_kv_was_dropped_answers_as_a_recomputation_and_is_stored_again)
from ..engine.test_resume import (  # noqa: F401
    FIRST, GREEDY_ARGS, SECOND, first_turn, test_fork_from_old_message_restores_shared_prefix,
    test_resume_in_new_process_equals_uninterrupted)
from .conftest import ROOT, run_chatdb


def test_retry_on_the_device_answers_as_the_first_answer(tmp_path):
    db = tmp_path / "a.db"
    env = {**os.environ, "PYTHONPATH": python_path()}
    done = subprocess.run(chatdb_argv("--db", db, *GREEDY_ARGS), input="Say a word.\n/retry\n",
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    with Archive.open(db) as archive:
        conv = archive.latest_conversation()
        question = [m for m in archive.messages(conv.id) if m.role == "user"][-1]
        answers = archive.children(question.id)
        head = archive.conversation(conv.id).head_id
    assert len(answers) == 2 and answers[0].content == answers[1].content != ""
    assert head == answers[1].id


def test_q8_0_kv_on_the_device_resumes_as_the_uninterrupted_answer(tmp_path, open_engine):
    # One engine in this process, the others in their own (the CPU suite's q8_0 check holds
    # four at once in one process: on llvmpipe, 2 GiB, llama.cpp crashed making the fourth).
    archive, engine = open_engine(tmp_path / "one.db", kv_type="q8_0")
    conv = archive.create_conversation("q8")
    engine.reply(conv.id, FIRST)
    expected = engine.reply(conv.id, SECOND).text
    db = tmp_path / "two.db"
    run_chatdb("ask", "--json", "--kv-type", "q8_0", *GREEDY_ARGS, FIRST, db=db)
    resumed, _ = run_chatdb("ask", "--json", "-c", "--kv-type", "q8_0", *GREEDY_ARGS, SECOND, db=db)
    assert resumed["kv"]["source"] == "archive" and resumed["kv"]["restored_tokens"] > 0
    assert resumed["text"] == expected
