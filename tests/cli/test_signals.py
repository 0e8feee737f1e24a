"""SIGTERM and SIGHUP are Ctrl-C then /quit: the answer kept, KV stored, the terminal restored."""

import os
import re
import shutil
import signal
import subprocess
import termios
import time

from chatdb.archive import Archive

from .test_console_pty import ANSWER_COLOUR, PROMPT, Terminal, terminal  # noqa: F401  (the fixture)

LONG = "Write a very long story about a dragon and a knight"
BRACKETED_PASTE_ON, BRACKETED_PASTE_OFF = "\x1b[?2004h", "\x1b[?2004l"


def _restored(term) -> None:
    """The pty is back in the mode the console found it in: echo, canonical, no bracketed paste."""
    attrs = termios.tcgetattr(term.master)
    assert attrs[3] & termios.ECHO and attrs[3] & termios.ICANON
    assert term.screen.rfind(BRACKETED_PASTE_OFF) > term.screen.rfind(BRACKETED_PASTE_ON)


def _stored_rows(archive, message_id) -> int:
    fingerprints = archive.kv.fingerprints_for(message_id)
    return len(archive.kv.rows_along_path(message_id, fingerprints.pop())) if fingerprints else 0


def _recomputed_matches(chatdb, db_path, tmp_path):
    copy = tmp_path / "copy.db"
    shutil.copy(db_path, copy)
    greedy = ("--temperature", "0", "--seed", "1", "--max-tokens", "12", "--ctx", "2048")
    resumed = chatdb("ask", "--json", "-c", *greedy, "And then?").json()
    recomputed = chatdb("ask", "--json", "-c", "--no-kv", *greedy, "And then?",
                        "--db", copy, db=False).json()
    assert resumed["kv"]["source"] == "archive"
    assert resumed["text"] == recomputed["text"]


def test_sigterm_while_an_answer_streams(terminal, db_path, tmp_path, chatdb):  # noqa: F811
    term = terminal("--max-tokens", "300")
    term.wait_for(PROMPT, timeout=300)
    term.type(LONG + "\r")
    term.wait_for(re.escape(ANSWER_COLOUR) + r"\w+ \w+", timeout=300)
    term.proc.send_signal(signal.SIGTERM)
    assert term.proc.wait(timeout=300) == 143
    _restored(term)   # read before close() lets the pty go
    term.close()
    with Archive.open(db_path) as archive:
        question, answer = archive.messages(1)
        assert question.content == LONG
        assert answer.status == "interrupted" and answer.content
        assert _stored_rows(archive, answer.id) == 2
    _recomputed_matches(chatdb, db_path, tmp_path)


def test_sighup_at_the_prompt(terminal, db_path, tmp_path, chatdb):  # noqa: F811
    term = terminal("--max-tokens", "8")
    term.wait_for(PROMPT, timeout=300)
    term.type("Name a colour\r")
    term.wait_for(r"tokens/s", timeout=300)
    term.wait_for(PROMPT, timeout=300)
    term.type("half a quest")   # typed, not sent
    term.wait_for("quest", timeout=300)
    term.proc.send_signal(signal.SIGHUP)
    assert term.proc.wait(timeout=300) == 129
    _restored(term)
    term.close()
    with Archive.open(db_path) as archive:
        question, answer = archive.messages(1)
        assert answer.status == "complete"
        assert _stored_rows(archive, answer.id) == 2
    _recomputed_matches(chatdb, db_path, tmp_path)


def test_sigterm_stops_ask_and_keeps_the_partial_answer(chatdb, db_path, tmp_path):
    process = subprocess.Popen(chatdb.argv("ask", "--temperature", "0", "--max-tokens", "400",
                                           "--ctx", "2048", LONG),
                               cwd=chatdb.cwd, env=chatdb.env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        first = os.read(process.stdout.fileno(), 1)   # the answer has begun (unbuffered: communicate reads the fd)
        process.send_signal(signal.SIGTERM)
        rest, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 143, err
    assert first and b"Traceback" not in err
    with Archive.open(db_path) as archive:
        question, answer = archive.messages(1)
        assert question.content == LONG
        assert answer.status == "interrupted"
        assert (first + rest).decode().strip() == answer.content.strip()
        assert _stored_rows(archive, answer.id) == 2
    _recomputed_matches(chatdb, db_path, tmp_path)


def test_ctrl_c_while_a_long_paste_is_read_stops_it_and_keeps_no_empty_answer(cli_env, db_path, tmp_path):
    env = {**cli_env, "TERM": "xterm-256color", "PROMPT_TOOLKIT_NO_CPR": "1",
           "XDG_STATE_HOME": str(tmp_path / "state")}
    term = Terminal(["--db", db_path, "--max-tokens", "20", "--ctx", "8192"], env)
    try:
        _stop_the_paste(term, db_path)
    finally:
        if term.proc.poll() is None:
            term.proc.kill()


def _stop_the_paste(term, db_path) -> None:
    term.wait_for(PROMPT, timeout=300)
    paste = "The lighthouse keepers of the northern coast kept long logs of every storm. " * 400
    term.type("\x1b[200~" + paste + "\x1b[201~\r")     # one pasted message, ~6,000 tokens
    term.wait_for(r"thinking", timeout=300)                          # shown once the prefill has run 1 s
    term.type("\x03")
    term.wait_for(r"stopped before the answer began; your message is kept", timeout=300)
    term.wait_for(PROMPT, timeout=300)
    term.type("/quit\r")
    assert term.close(timeout=300) == 0
    with Archive.open(db_path) as archive:
        path = archive.messages(1)
    assert [m.role for m in path] == ["user"] and path[0].content == paste


def test_bad_bytes_and_a_storm_of_sigints(terminal, db_path):  # noqa: F811
    """Bytes that are not UTF-8 at the prompt, then 200 SIGINTs in 4 s during an answer:
    one line for each bad line, no traceback, and Ctrl-D then leaves at once."""
    term = terminal("--max-tokens", "300")
    term.wait_for(PROMPT, timeout=300)
    os.write(term.master, b"caf\xff\xfe b\xc3d\r")
    term.wait_for(r"error: the message is not valid UTF-8 text \(byte 0xff at character 4\)")
    term.wait_for(PROMPT)
    term.type(LONG + "\r")
    term.wait_for(re.escape(ANSWER_COLOUR) + r"\w+", timeout=300)
    storm_ends = time.monotonic() + 4
    for _ in range(200):   # at the answer, then at the prompts that follow it
        term.proc.send_signal(signal.SIGINT)
        time.sleep(max(0.0, min(0.02, storm_ends - time.monotonic())))
    term.wait_for(r"\[interrupted\]")
    term.type("\x04")
    assert term.close(timeout=30) == 0
    assert "Traceback" not in term.screen and "Error" not in term.screen
    with Archive.open(db_path) as archive:
        question, answer = archive.messages(1)
        assert question.content == LONG
        assert answer.status == "interrupted" and answer.content
        assert archive.count_conversations() == 1   # the bad line made none
