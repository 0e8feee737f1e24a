"""The console in a real pseudo-terminal, as a user meets it.

The process gets the pty as its controlling terminal, so Ctrl-C is a real
SIGINT from the terminal driver and Ctrl-D a real end of input.
"""

import os
import pty
import re
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from chatdb.archive import Archive

from ..chatdb_command import chatdb_argv
from .conftest import PROCESS_TIMEOUT

REPO = Path(__file__).resolve().parents[2]

# Become a session leader with the pty as controlling terminal, then run chatdb (argv after -c).
LAUNCH = ("import fcntl, os, sys, termios; os.setsid(); fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
          "os.execv(sys.argv[1], sys.argv[1:])")
PROMPT = "› "
ANSWER_COLOUR = "\x1b[36m"


class Terminal:
    def __init__(self, args, env):
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen([sys.executable, "-c", LAUNCH, *chatdb_argv(*args)], cwd=REPO,
                                     env=env, stdin=slave, stdout=slave, stderr=slave)
        os.close(slave)
        self.screen = ""
        self.seen = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            self.screen += data.decode(errors="replace")

    def wait_for(self, pattern: str, timeout: float = PROCESS_TIMEOUT) -> str:
        """Wait until `pattern` (a regex) shows after what was already waited for."""
        found = self.until(lambda: re.search(pattern, self.screen[self.seen:]), timeout,
                           f"{pattern!r} did not show")
        self.seen += found.end()
        return found.group(0)

    def until(self, condition, timeout: float = PROCESS_TIMEOUT, what: str = "the condition"):
        """Poll `condition()` until it is true (returned), failing after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = condition()
            if result:
                return result
            time.sleep(0.05)
        raise AssertionError(f"{what}; the screen ends with:\n{self.screen[-2000:]!r}")

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def close(self, timeout: float = PROCESS_TIMEOUT) -> int:
        status = self.proc.wait(timeout=timeout)
        os.close(self.master)
        return status


@pytest.fixture
def terminal(cli_env, db_path, tmp_path):
    env = {**cli_env, "TERM": "xterm-256color", "PROMPT_TOOLKIT_NO_CPR": "1",
           "XDG_STATE_HOME": str(tmp_path / "state")}
    opened = []

    def start(*args, **extra_env):
        term = Terminal([*args, "--db", db_path, "--temperature", "0", "--ctx", "2048"],
                        {**env, **extra_env})
        opened.append(term)
        return term

    yield start
    for term in opened:
        if term.proc.poll() is None:
            term.proc.kill()
            term.proc.wait()


def test_chat_interrupt_quit_and_continue_with_the_context_resumed(terminal, db_path, tmp_path):
    term = terminal("--max-tokens", "200")
    term.wait_for(r"SmolLM2.*CPU.*archive")
    term.wait_for(PROMPT)
    term.type("Write a very long story about a dragon and a knight\r")
    term.wait_for(re.escape(ANSWER_COLOUR) + r"\w+")   # the answer streams, in colour
    term.type("\x03")                                   # Ctrl-C while it streams
    term.wait_for(r"\[interrupted\]")
    term.wait_for(r"tokens/s · first token [\d.,]+ m?s · read \d+ tokens · interrupted")
    term.wait_for(PROMPT)
    term.type("\x04")                                   # Ctrl-D: leave
    assert term.close() == 0
    assert (tmp_path / "state" / "chatdb" / "history").read_text().count("dragon") == 1
    with Archive.open(db_path) as archive:
        question, answer = archive.messages(1)
        assert answer.status == "interrupted" and answer.content
        assert len(archive.kv.rows_along_path(answer.id, archive.kv.fingerprints_for(answer.id).pop())) == 2

    term = terminal("-c", "--max-tokens", "40")
    term.wait_for(r"continuing #1 .*2 messages")
    term.wait_for(PROMPT)
    term.type("And then?\r")
    term.wait_for(re.escape(ANSWER_COLOUR))
    answer_start = term.seen
    term.type("/history\r")                           # typed ahead while the answer streams
    term.wait_for(r"resumed [\d,]+ tokens from the archive in [\d.,]+ m?s while you typed")
    assert "/history" not in term.screen[answer_start:term.seen]   # not echoed into the answer
    term.wait_for(r"\[3\] you")                        # ...but run at the next prompt
    term.wait_for(PROMPT)
    term.type("/quit\r")
    assert term.close() == 0
    with Archive.open(db_path) as archive:
        assert [m.content for m in archive.messages(1)][2] == "And then?"


def test_no_color_keeps_answers_plain(terminal):
    term = terminal("--max-tokens", "4", NO_COLOR="1")
    term.wait_for(PROMPT)
    term.type("Hi\r")
    term.wait_for(r"tokens/s")
    term.wait_for(PROMPT)
    term.type("\x04")
    assert term.close() == 0
    assert ANSWER_COLOUR not in term.screen and "\x1b[2m" not in term.screen


def _prompt_ended(master) -> bool:
    """The terminal is out of the prompt's raw mode (it turns ISIG off; between prompts the
    console keeps it on, so that Ctrl-C is a SIGINT)."""
    return bool(termios.tcgetattr(master)[3] & termios.ISIG)


def test_ctrl_d_typed_while_a_command_runs_quits_at_the_next_prompt(terminal, db_path):
    """In the terminal's normal mode a Ctrl-D typed while no prompt reads is taken as an
    end of input and is lost; the console keeps keys as typed between its prompts."""
    with Archive.open(db_path) as archive:
        conv = archive.create_conversation("before")
    term = terminal("-c")
    term.wait_for(PROMPT, timeout=300)
    blocker = Archive.open(db_path)
    blocker.conn.execute("BEGIN IMMEDIATE")      # /rename waits for the write lock
    try:
        term.type("/rename after\r")
        term.until(lambda: _prompt_ended(term.master), what="the prompt did not end")
        term.type("\x04")                        # while /rename waits, no prompt reading
    finally:
        blocker.conn.execute("COMMIT")
        blocker.close()
    term.wait_for("renamed to 'after'")
    assert term.close(timeout=60) == 0
    with Archive.open(db_path) as archive:
        assert archive.conversation(conv.id).title == "after"
