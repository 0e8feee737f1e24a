'''The console without a terminal: `chatdb` reading messages from stdin, in a real process.

Answers go to stdout, everything about them to stderr; `"""` lines fence a
multi-line message; `-c` continues with the model state resumed from the
archive, not re-read.
'''

import re

from chatdb.archive import Archive

FAST = ("--max-tokens", "6", "--temperature", "0", "--ctx", "2048")
ESCAPE = re.compile(r"\x1b\[")


def test_bare_chatdb_answers_each_line_and_keeps_stdout_for_answers(chatdb, db_path):
    result = chatdb(*FAST, input="Name a colour\nName a fruit\n")
    assert result.returncode == 0, result.stderr
    with Archive.open(db_path) as archive:
        conv = archive.latest_conversation()
        path = archive.messages(conv.id)
    assert [m.role for m in path] == ["user", "assistant"] * 2
    assert conv.title == "Name a colour"
    assert result.stdout == "".join(m.content + "\n" for m in path if m.role == "assistant")
    assert "SmolLM2" in result.stderr and str(db_path) in result.stderr  # the welcome
    assert result.stderr.count("tokens/s") == 2
    assert not ESCAPE.search(result.stdout + result.stderr)  # no colour off a terminal


def test_fenced_lines_are_one_message(chatdb, db_path):
    chatdb(*FAST, input='"""\nfirst line\n\nthird line\n"""\n')
    with Archive.open(db_path) as archive:
        path = archive.messages(archive.latest_conversation().id)
    assert path[0].content == "first line\n\nthird line"
    assert len(path) == 2


def test_continue_resumes_the_context_from_the_archive(chatdb, db_path):
    chatdb(*FAST, input="Remember the word kiwi\n")
    result = chatdb("-c", *FAST, input="Which word?\n")
    assert result.returncode == 0, result.stderr
    assert "continuing #1" in result.stderr
    assert re.search(r"resumed [\d,]+ tokens from the archive in [\d.,]+ m?s", result.stderr)
    with Archive.open(db_path) as archive:
        assert len(archive.messages(1)) == 4
        assert archive.count_conversations() == 1


def test_chat_conv_opens_that_conversation(chatdb, db_path, sample):
    result = chatdb("chat", str(sample.trip), *FAST, input="/history\nAnd day two?\n")
    assert result.returncode == 0, result.stderr
    assert "Plan three days in Kyoto" in result.stdout
    with Archive.open(db_path) as archive:
        assert archive.messages(sample.trip)[-2].content == "And day two?"


def test_slash_commands_work_and_a_failure_sets_the_exit_status(chatdb, sample):
    result = chatdb(*FAST, input="/list\n/swich 1\n")
    assert result.returncode == 1
    assert "Borrowing" in result.stdout and "Trip to Kyoto" in result.stdout
    assert "error: unknown command /swich; did you mean /switch?" in result.stderr


def test_start_up_errors(chatdb, sample):
    assert "no conversation 99" in chatdb("chat", "99", *FAST, input="").error(1)
    line = chatdb("-c", "--system", "x", *FAST, input="").error(2)
    assert "--system starts a new conversation" in line
    assert "give CONV or -c" in chatdb("chat", "1", "-c", *FAST, input="").error(2)


def test_empty_input_leaves_no_conversation(chatdb, db_path):
    result = chatdb(*FAST, input="")
    assert result.returncode == 0
    with Archive.open(db_path) as archive:
        assert archive.count_conversations() == 0


def test_help_lists_the_console_among_the_commands(chatdb):
    result = chatdb("--help", db=False)
    assert result.returncode == 0
    assert "usage: chatdb" in result.stdout and "opens the console" in result.stdout
    assert "chat " in result.stdout and "-c, --continue" in result.stdout
