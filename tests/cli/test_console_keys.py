"""The console's prompt driven by keys: prompt_toolkit's pipe input, the real model and archive.

Keys are bytes as a terminal sends them: Enter is \\r, Alt-Enter is Esc \\r,
Ctrl-C \\x03, Ctrl-D \\x04, Up Esc[A, a paste is wrapped in Esc[200~ ... Esc[201~.
"""

import io
import os
import stat
import threading

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from cli.console import app
from cli.console.completion import ConsoleCompleter
from cli.console.history_file import ensure_private, history_path
from engine.llama.sampling import SamplingSettings

from ..polling import wait_until

ENTER, ALT_ENTER, CTRL_C, CTRL_D, UP, CTRL_R, CTRL_U = "\r", "\x1b\r", "\x03", "\x04", "\x1b[A", "\x12", "\x15"
GREEDY = SamplingSettings(temperature=0, max_tokens=4, seed=1)


@pytest.fixture
def session(shared_model):
    """A session of its own for each test, on the module's archive and model."""
    return shared_model.session()


def type_keys(session, keys: str, *later, history=None) -> int:
    """Run the prompt loop on `keys`, then Ctrl-D: leave when they are used up.

    `later`: (ready, keys) pairs, each sent once ready(buffer) holds for the
    prompt's buffer (polled, with a deadline), as a person types on when they
    see the screen change: Tab completes in the background, and keys already
    waiting would overtake its result.
    """
    session.quitting = False
    session.render.out, session.render.err = io.StringIO(), io.StringIO()
    prompts, stuck = [], []
    made_by_app = app.make_prompts

    def make_prompts(*args, **kwargs):  # the same prompts, seen by the sender
        made = made_by_app(*args, **kwargs)
        prompts.append(made[0])
        return made

    with create_pipe_input() as pipe:
        pipe.send_text(keys + ("" if later else CTRL_D))
        sender = threading.Thread(target=_send_when_ready, args=(pipe, prompts, later, stuck))
        if later:
            sender.start()
        # A test whose keys leave the prompt waiting fails instead of hanging the suite.
        rescued = []
        watchdog = threading.Timer(120, lambda: rescued.append(pipe.send_text(CTRL_C + CTRL_D)))
        watchdog.start()
        app.make_prompts = make_prompts
        try:
            status = app.run(session, input=pipe, output=DummyOutput(),
                             history=history or InMemoryHistory())
        finally:
            app.make_prompts = made_by_app
            watchdog.cancel()
        if sender.is_alive():
            sender.join()
    assert not stuck, f"the screen never got ready for {stuck[0]!r}"
    assert not rescued, "the prompt was still waiting for keys after 120 s"
    return status


def _send_when_ready(pipe, prompts, later, stuck) -> None:
    for ready, keys in later:
        try:
            wait_until(lambda: prompts and ready(prompts[0].default_buffer), what=repr(keys))
        except AssertionError:
            stuck.append(keys)
            pipe.send_text(CTRL_C + CTRL_D)
            return
        pipe.send_text(keys)
    pipe.send_text(CTRL_D)


def sent(session) -> list[str]:
    """The user's messages on the current path."""
    return [m.content for m in session.path() if m.role == "user"]


def fresh(session) -> None:
    session.start_new()


def test_enter_sends_and_the_answer_streams(session):
    fresh(session)
    assert type_keys(session, "Hello there" + ENTER) == 0
    assert sent(session) == ["Hello there"]
    answer = session.path()[-1]
    assert answer.role == "assistant" and session.render.out.getvalue() == answer.content + "\n"
    assert "tokens/s" in session.render.err.getvalue()


def test_alt_enter_starts_a_new_line(session):
    fresh(session)
    type_keys(session, "line one" + ALT_ENTER + "line two" + ENTER)
    assert sent(session) == ["line one\nline two"]


def test_pasted_lines_stay_one_message(session):
    fresh(session)
    type_keys(session, "\x1b[200~para one\n\npara two\x1b[201~" + ENTER)
    assert sent(session) == ["para one\n\npara two"]


def test_ctrl_c_at_the_prompt_clears_the_line(session):
    fresh(session)
    type_keys(session, "thrown away" + CTRL_C + "kept" + ENTER)
    assert sent(session) == ["kept"]


def test_history_is_kept_across_sessions_and_searchable(session, tmp_path):
    path = tmp_path / "history"
    fresh(session)
    type_keys(session, "remember this line" + ENTER + "/help" + ENTER, history=FileHistory(str(path)))
    assert "remember this line" in path.read_text()
    fresh(session)  # a new prompt session on the same file: Up recalls the older lines
    type_keys(session, UP + UP + ENTER, history=FileHistory(str(path)))
    assert sent(session) == ["remember this line"]
    fresh(session)
    type_keys(session, CTRL_R + "rememb" + ENTER + ENTER, history=FileHistory(str(path)))
    assert sent(session) == ["remember this line"]


def test_history_file_is_private_under_xdg_state_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    warnings = []
    path = ensure_private(history_path(), warnings.append)
    assert path == tmp_path / "state" / "chatdb" / "history"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    for directory in (path.parent, path.parent.parent):  # under umask 000
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    assert warnings == []
    path.write_text("typed before\n")
    os.chmod(path, 0o644)
    ensure_private(history_path(), warnings.append)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and path.read_text() == "typed before\n"
    assert len(warnings) == 1 and str(path) in warnings[0] and "0644" in warnings[0]
    ensure_private(history_path(), warnings.append)
    assert len(warnings) == 1  # said once


def test_tab_completes_commands_and_conversation_titles(session):
    fresh(session)
    type_keys(session, "Tabby question" + ENTER + "/rename Zanzibar trip" + ENTER)
    target = session.conv_id
    fresh(session)
    type_keys(session, "/swi\t",
              (lambda buffer: buffer.text.startswith("/switch"), " Zanz\t"),
              (lambda buffer: "Zanzibar" in buffer.text, ENTER))
    assert session.conv_id == target


def completions(session, text: str) -> list[str]:
    found = ConsoleCompleter(session).get_completions(Document(text), CompleteEvent(True))
    return [c.text for c in found]


def test_completion_of_arguments(session, tmp_path):
    fresh(session)
    type_keys(session, "Completion one" + ENTER + "Completion two" + ENTER)
    assert completions(session, "/s") == ["/switch", "/search", "/system", "/set", "/stats"]
    assert completions(session, "/edit ") == ["1", "3"]          # your messages only
    assert completions(session, "/fork ") == ["1", "2", "3", "4"]
    assert completions(session, f"/switch #{session.conv_id}") == [f"#{session.conv_id}"]
    assert "temperature=" in completions(session, "/set max_tokens=3 te")
    assert completions(session, "/help ret") == ["retry"]
    (tmp_path / "notes.md").write_text("x")
    assert completions(session, f"/export {tmp_path}/no") == ["tes.md"]
    assert completions(session, "plain text") == []


def test_ctrl_x_ctrl_e_writes_the_message_in_the_editor(session, tmp_path, monkeypatch):
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nprintf 'written in\\nthe editor\\n' > \"$1\"\n")
    editor.chmod(0o755)
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", str(editor))
    fresh(session)
    # Ctrl-X Ctrl-E: edit, then send. Ctrl-D comes once it is answered: while the
    # editor runs, prompt_toolkit would take it as "delete a character" in the draft.
    answered = lambda buffer: "tokens" in session.render.err.getvalue()  # noqa: E731
    type_keys(session, "draft" + "\x18\x05", (answered, ""))
    assert sent(session) == ["written in\nthe editor"]


def test_edit_puts_the_old_text_in_the_prompt(session):
    fresh(session)
    type_keys(session, "Old wording" + ENTER)
    old = session.path()[0]
    type_keys(session, "/edit 1" + ENTER + CTRL_U + "New wording" + ENTER)
    question = session.path()[0]
    assert question.content == "New wording" and question.parent_id == old.parent_id
    assert question.id != old.id and session.path()[-1].role == "assistant"


def test_delete_asks_at_the_prompt(session):
    fresh(session)
    type_keys(session, "Delete me later" + ENTER)
    doomed = session.conv_id
    type_keys(session, "/delete" + ENTER + "n" + ENTER)
    assert session.conv_id == doomed
    type_keys(session, "/delete" + ENTER + "y" + ENTER)
    assert doomed not in [c.id for c in session.archive.list_conversations()]


def test_quit_ends_the_loop(session):
    fresh(session)
    type_keys(session, "/quit" + ENTER + "never sent" + ENTER)
    assert session.conv_id is None
