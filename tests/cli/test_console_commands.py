"""Every slash command of the console, with its errors, on the real model and a real archive.

The console runs in this process through its stdin mode (the same dispatch
as at the prompt). The module loads the model once, on one archive, and each
test gets a session of its own on them (its conversation, settings, search
hits); the test that swaps the model loads its own.
"""

import io
import os
import signal
import stat

import pytest

from chatdb.archive import Archive
from chatdb.clock import now
from cli.console.slash import table
from cli.console import stdin_mode
from cli.console.screen.render import Renderer
from cli.console.session import Session
from engine.llama.sampling import SamplingSettings

from .conftest import SharedModel

GREEDY = SamplingSettings(temperature=0, max_tokens=6, seed=1)


class Console:
    def __init__(self, session: Session, db_path):
        self.session, self.db_path = session, db_path
        self.status = 0

    def __call__(self, script: str) -> tuple[str, str]:
        """Run lines as if piped to `chatdb`; (stdout, stderr) of just these lines."""
        out, err = io.StringIO(), io.StringIO()
        self.session.render.out, self.session.render.err = out, err
        self.session.quitting, self.session.errors = False, 0
        self.status = stdin_mode.run(self.session, io.StringIO(script))
        return out.getvalue(), err.getvalue()

    @property
    def archive(self) -> Archive:
        return self.session.archive

    def path(self):
        return self.session.path()

    def ok(self, script: str) -> tuple[str, str]:
        out, err = self(script)
        assert self.status == 0, err
        assert "error:" not in err
        return out, err

    def error(self, script: str) -> str:
        """The one error line the script caused."""
        out, err = self(script)
        assert self.status == 1
        errors = [line for line in err.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1, err
        return errors[0]


@pytest.fixture
def console(shared_model):
    return Console(shared_model.session(), shared_model.archive.db_path)


@pytest.fixture
def own_console(tmp_path):
    """A console with its own archive and model, for a test that replaces the engine."""
    model = SharedModel(tmp_path / "chatdb.db", GREEDY)
    console = Console(model.session(), model.archive.db_path)
    yield console
    console.session.close()  # the engine it ends with, and the archive


def new(console, first="Hello there", title=""):
    """A new conversation with one exchange; its id."""
    console.ok(f"/new {title}\n{first}\n")
    return console.session.conv_id


# -- the table, /help, unknown commands ---------------------------------------------


def test_help_lists_every_command_and_the_keys(console):
    out, _ = console.ok("/help\n")
    for name in table.names():
        assert f"/{name}" in out
    for name in ("new", "list", "switch", "rename", "delete", "history", "branches", "search",
                 "open", "fork", "edit", "retry", "back", "system", "model", "set", "stats",
                 "export", "help", "quit"):
        assert name in table.names()
    assert "Alt-Enter" in out and "Ctrl-R" in out and "$EDITOR" in out


def test_help_for_one_command_and_for_an_unknown_one(console):
    out, _ = console.ok("/help switch\n")
    assert "/switch N|#ID|TITLE" in out and "#ID" in out
    assert "did you mean /fork?" in console.error("/help frok\n")


def test_unknown_command_suggests_the_closest(console):
    assert "unknown command /serch; did you mean /search?" in console.error("/serch rust\n")
    assert "did you mean /history?" in console.error("/hist\n")
    assert "/help lists the commands" in console.error("/zzzzzz\n")


def test_double_slash_sends_a_message_starting_with_a_slash(console):
    console.ok("/new\n//etc/hosts: what is it for?\n")
    assert console.path()[0].content == "/etc/hosts: what is it for?"


def test_a_message_too_long_for_the_context_leaves_no_conversation(console):
    count = console.archive.count_conversations()
    assert "does not fit the context" in console.error("/new\n" + "lorem " * 3000 + "\n")
    assert console.archive.count_conversations() == count and console.session.conv_id is None


def test_quit_stops_reading(console):
    new(console)
    before = len(console.path())
    console.ok("/quit\nthis line is never sent\n")
    assert console.session.quitting
    assert len(console.path()) == before


# -- conversations ----------------------------------------------------------------


def test_new_is_saved_only_with_its_first_message(console):
    count = console.archive.count_conversations()
    console.ok("/new\n/new Plans\n")
    assert console.archive.count_conversations() == count
    out, err = console.ok("Where should we go?\n")
    assert out.strip()  # the answer
    conv = console.session.conversation()
    assert conv.title == "Plans"
    assert [m.role for m in console.path()] == ["user", "assistant"]
    assert "tokens/s" in err and "first token" in err and "read " in err


def test_list_is_numbered_most_recent_first_with_the_current_marked(console):
    older = new(console, "first of two")
    newer = new(console, "second of two")
    out, _ = console.ok("/list 2\n")
    lines = out.splitlines()
    assert lines[0].startswith("*  1  #" + str(newer))
    assert lines[1].startswith("   2  #" + str(older))
    assert console.session.listed == [newer, older]
    assert "whole number" in console.error("/list 0\n")


def test_list_shows_owners_and_filters_by_user(console):
    archive = console.session.archive
    theirs = archive.create_conversation("Ann's chat", owner="ann")
    archive.add_message(theirs.id, "user", "a question of ann's")
    mine = new(console, "a question of the console's")
    out, _ = console.ok("/list 50\n")
    assert "[ann]" in out and f"#{mine}" in out
    out, _ = console.ok("/list --user ann\n")
    assert out.count("#") == 1 and f"#{theirs.id}" in out and "[ann]" in out
    assert "--user NAME" in console.error("/list --user\n")


def test_switch_by_number_id_and_title(console):
    a = new(console, "alpha question", title="Alpha notes")
    b = new(console, "beta question", title="Beta notes")
    console.ok("/list\n/switch 2\n")
    assert console.session.conv_id == a
    console.ok(f"/switch #{b}\n")
    assert console.session.conv_id == b
    tick = now()
    while now() == tick:  # updated_at has millisecond resolution: the next touch sorts later
        pass
    out, err = console.ok("/switch alpha NOTES\n")
    assert console.session.conv_id == a
    assert "switched to" in err and "alpha question" in out
    assert console.archive.latest_conversation().id == a  # what `chatdb -c` reopens


def test_switch_errors(console):
    new(console, "gamma", title="Gamma one")
    new(console, "gamma", title="Gamma two")
    assert "2 conversations match 'gamma'" in console.error("/switch gamma\n")
    assert "no conversation titled" in console.error("/switch no such title\n")
    assert "no conversation 99999" in console.error("/switch #99999\n")
    assert "no number 500" in console.error("/list 3\n/switch 500\n")
    assert "usage: /switch" in console.error("/switch\n")


def test_rename_now_and_before_the_first_message(console):
    conv = new(console)
    console.ok("/rename Better title\n")
    assert console.archive.conversation(conv).title == "Better title"
    console.ok("/new\n/rename Named early\nfirst words\n")
    assert console.session.conversation().title == "Named early"
    assert "give the new title" in console.error("/rename\n")


def test_delete_asks_first(console):
    keep = new(console, "keep me")
    console.ok("/delete\nn\n")
    assert console.archive.conversation(keep)
    out, err = console.ok("/delete\ny\n")
    assert "deleted #" in err
    assert console.session.conv_id is None  # left in a new conversation
    assert keep not in [c.id for c in console.archive.list_conversations()]


def test_delete_another_and_errors(console):
    other = new(console, "delete this one", title="Doomed")
    new(console)
    console.ok(f"/delete #{other}\nyes\n")
    assert other not in [c.id for c in console.archive.list_conversations()]
    assert "nothing to delete" in console.error("/new\n/delete\n")


# -- the tree ------------------------------------------------------------------------


def test_history_numbers_the_path_and_shows_the_system_prompt(console):
    console.ok("/new\n/system Answer briefly.\nName a fruit\nName a colour\n")
    out, _ = console.ok("/history\n")
    assert out.startswith("system prompt: Answer briefly.")
    assert "[1] you" in out and "[2] assistant" in out and "[4] assistant" in out
    assert "Name a colour" in out
    last, _ = console.ok("/history 1\n")
    assert "[4] assistant" in last and "[3]" not in last
    assert "whole number" in console.error("/history x\n")


def test_retry_makes_a_sibling_and_branches_mark_the_path(console):
    new(console, "Say a word")
    first = console.path()[-1]
    console.ok("/retry\n")
    second = console.path()[-1]
    assert second.id != first.id and second.parent_id == first.parent_id
    out, _ = console.ok("/branches\n")
    lines = out.splitlines()
    assert lines[0].startswith("* [1] you: Say a word")
    assert any(line.startswith("  ├─ assistant:") for line in lines)   # the old answer
    assert any(line.startswith("* └─ [2] assistant:") and "◀ head" in line for line in lines)
    assert "takes no arguments" in console.error("/branches all\n")


def test_retry_errors(console):
    assert "no message to answer" in console.error("/new\n/retry\n")


def test_back_moves_to_the_branch_point(console):
    new(console, "Pick a number")
    question = console.path()[-2]
    console.ok("/retry\n")
    out, err = console.ok("/back\n")
    assert console.session.conversation().head_id == question.id
    assert "branches" in err
    assert "no branch point" in console.error("/new\nOne line only\n/back\n")


def test_fork_from_a_numbered_message(console):
    conv = new(console, "Tell me about rivers")
    console.ok("And about lakes\n")
    path = console.path()
    out, err = console.ok("/fork 2\n")
    fork = console.session.conversation()
    assert fork.id != conv and fork.head_id == path[1].id
    assert "forked at message 2" in err
    console.ok("/fork 1\n")
    assert console.session.conversation().head_id == path[0].id
    assert "/retry answers it" in console("/fork 1\n")[1]


def test_fork_errors(console):
    new(console)
    assert "no message 9" in console.error("/fork 9\n")
    assert "whole number" in console.error("/fork two\n")
    assert "no messages yet" in console.error("/new\n/fork\n")


def test_edit_makes_a_new_branch_and_answers_it(console):
    new(console, "What is two plus two?")
    old_question, old_answer = console.path()
    out, err = console.ok("/edit 1 What is three plus three?\n")
    question, answer = console.path()
    assert question.content == "What is three plus three?" and question.id != old_question.id
    assert question.parent_id == old_question.parent_id and answer.parent_id == question.id
    assert out.strip()  # the new answer streamed
    tree = console.archive.tree(console.session.conv_id)
    assert {old_question.id, old_answer.id} <= {m.id for m in tree}


def test_edit_without_text_takes_the_next_message(console):
    new(console, "Spell cat")
    console.ok('/edit 1\n"""\nSpell\ndog\n"""\n')
    assert console.path()[0].content == "Spell\ndog"


def test_edit_errors(console):
    new(console, "Edit me")
    assert "only your messages" in console.error("/edit 2 new text\n")
    assert "give a message number" in console.error("/edit\n")
    assert "unchanged" in console.error("/edit 1 Edit me\n")


# -- search ---------------------------------------------------------------------------


def test_search_ranks_and_marks_and_open_goes_there(console):
    target = new(console, "Zebrafish zebrafish facts please", title="Fish")
    console.ok("Anything else?\n")
    new(console, "unrelated words")
    out, _ = console.ok("/search zebrafish\n")
    assert out.lstrip().startswith("1  #" + str(target))
    assert "**Zebrafish**" in out
    out, err = console.ok("/open 1\n")
    assert console.session.conv_id == target
    assert "opened" in err and "at message 1" in err
    assert "[1] you" in out and "◀" in out and "Zebrafish zebrafish facts please" in out


def test_open_on_another_branch_moves_the_head(console):
    conv = new(console, "Quokka question")
    console.ok("/edit 1 Wombat question\n")
    console.ok("/search quokka\n/open 1\n")
    assert console.session.conv_id == conv
    assert console.path()[0].content == "Quokka question"


def test_search_and_open_errors(console):
    assert "give the words" in console.error("/search\n")
    out, _ = console.ok("/search xylophonic\n")
    assert "no messages match" in out
    console.session.hits = []
    assert "no search yet" in console.error("/open 1\n")
    new(console, "Narwhal")
    assert "from 1 to" in console.error("/search narwhal\n/open 99\n")


# -- settings ----------------------------------------------------------------------------


def test_system_on_a_new_conversation_becomes_its_root(console):
    console.ok("/new\n/system You are a pirate.\nAhoy\n")
    assert [m.role for m in console.path()] == ["system", "user", "assistant"]
    out, _ = console.ok("/system\n")
    assert "You are a pirate." in out


def test_system_on_a_saved_empty_conversation_is_the_root_everyone_reads(console, cli_env):
    from chatdb.transfer.export_json import export_document
    from .conftest import Chatdb

    empty = console.archive.create_conversation("empty", system_prompt="Old prompt.")
    console.ok(f"/switch #{empty.id}\n/system New prompt.\n")
    assert console.session.conv_id == empty.id
    assert console.session.system_prompt() == "New prompt."
    assert console.archive.conversation(empty.id).system_prompt == "New prompt."
    out, _ = console.ok("/system\n")
    assert out.strip() == "system prompt: New prompt."
    exported = export_document(console.archive, [empty.id])["conversations"][0]
    assert exported["system_prompt"] == "New prompt."
    shown = Chatdb(console.db_path, cli_env)("show", empty.id, "--json").json()
    assert shown["system_prompt"] == shown["messages"][0]["content"] == "New prompt."
    console.ok("Ahoy\n")  # the model reads the new root
    assert [(m.role, m.content) for m in console.path()][:2] == [
        ("system", "New prompt."), ("user", "Ahoy")]


def test_system_with_messages_starts_a_new_conversation(console):
    conv = new(console, "Hello")
    out, err = console.ok("/system Be terse.\n")
    assert console.session.conv_id is None and "started a new conversation" in err
    console.ok("Hi\n")
    assert console.path()[0].content == "Be terse." and console.session.conv_id != conv
    assert console.archive.messages(conv)[0].role == "user"  # the old one is untouched


def test_set_shows_changes_and_checks(console):
    out, _ = console.ok("/set\n")
    assert "temperature=0" in out and "max_tokens=6" in out
    console.ok("/set max_tokens=3 seed=none\n")
    assert console.session.sampling.max_tokens == 3 and console.session.sampling.seed is None
    _, err = console.ok("/new\nCount to ten\n")
    assert err.splitlines()[-1].startswith("3 tokens") and "max_tokens" in err
    assert "did you mean temperature?" in console.error("/set temprature=1\n")
    assert "top_p must be" in console.error("/set top_p=2\n")
    assert "write seed=VALUE" in console.error("/set seed\n")
    console.ok("/set max_tokens=6 seed=1\n")


def test_model_shows_and_a_bad_path_keeps_the_current_one(console, tmp_path):
    out, _ = console.ok("/model\n")
    assert "SmolLM2" in out and "runs on: CPU" in out
    bad = tmp_path / "nothing.gguf"
    assert "does not exist" in console.error(f"/model {bad}\n")
    new(console, "Still answering?")
    assert console.path()[-1].role == "assistant"


def test_model_switch_reloads_and_keeps_chatting(own_console):
    console = own_console
    path = console.session.engine.model.path
    conv = new(console, "Before the switch")
    _, err = console.ok(f"/model {path}\nAfter the switch\n")
    assert "switched from" in err
    assert console.session.conv_id == conv and len(console.path()) == 4


# -- figures, export ---------------------------------------------------------------------


def test_stats_has_the_session_figures(console):
    new(console, "For the figures")
    out, _ = console.ok("/stats\n")
    for label in ("answers", "tokens generated", "tokens/s", "first token", "median",
                  "p95", "KV restored from memory", "KV restored from archive", "archive",
                  "KV stored", "KV budget", "of the disk", "backend", "CPU"):
        assert label in out, label
    threads = next(line for line in out.splitlines() if line.lstrip().startswith("threads"))
    assert " thread" in threads.split("threads", 1)[1] and "cores" in threads  # count and why
    assert "takes no arguments" in console.error("/stats now\n")


def test_export_markdown_to_the_screen_and_to_a_file(console, tmp_path):
    new(console, "Export this please", title="Exported")
    out, _ = console.ok("/export\n")
    assert out.startswith("# Exported") and "## User\n\nExport this please" in out
    target = tmp_path / "chat.md"
    target.write_text("an older export")
    os.chmod(target, 0o644)
    console.ok(f"/export {target}\n")  # under umask 000: the mode is chatdb's choice
    assert target.read_text().startswith("# Exported")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["chat.md"]  # no temporary left
    assert "not saved yet" in console.error("/new\n/export\n")
    new(console)
    assert f"{tmp_path}: Is a directory" in console.error(f"/export {tmp_path}\n")
    assert [p.name for p in tmp_path.iterdir()] == ["chat.md"]


# -- Ctrl-C during an answer -------------------------------------------------------------


class InterruptingRenderer(Renderer):
    """Sends this process SIGINT (as Ctrl-C would) once two pieces are written."""

    pieces = 0

    def stream(self, text: str) -> None:
        super().stream(text)
        self.pieces += 1
        if self.pieces == 2:
            os.kill(os.getpid(), signal.SIGINT)


def test_ctrl_c_during_an_answer_keeps_the_partial_text(console):
    session = console.session
    saved = session.render
    session.render = InterruptingRenderer(out=io.StringIO(), err=io.StringIO(), color=False)
    try:
        console.ok("/set max_tokens=40\n/new\nWrite a long story about a cat\n")
    finally:
        out = session.render.out.getvalue()
        session.render = saved
    answer = console.path()[-1]
    assert answer.status == "interrupted"
    assert out.startswith(answer.content) and "[interrupted]" in out
    assert 2 <= len(session.engine.model.tokenize(answer.content, special=False)) < 40
