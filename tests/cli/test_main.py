"""The command's frame: help, version, where the archive is, exit codes."""

import os
import platform
import signal
import stat
import subprocess
from pathlib import Path

import pytest

from chatdb.archive import Archive

from ..polling import wait_until


def test_help_lists_every_command(chatdb):
    result = chatdb("--help", db=False)
    assert result.returncode == 0
    assert "usage: chatdb" in result.stdout
    for command in ("chat", "ask", "list", "show", "search", "fork", "delete", "rename", "export",
                    "import", "doctor"):
        assert command in result.stdout


def test_version(chatdb):
    result = chatdb("--version", db=False)
    assert result.returncode == 0
    assert result.stdout.startswith("chatdb ")


def test_an_archive_others_can_read_is_made_private_and_said_once(chatdb, db_path):
    Archive.open(db_path).close()
    os.chmod(db_path, 0o644)
    first = chatdb("list")
    assert first.returncode == 0 and first.stdout.strip() == "no conversations"
    assert first.stderr.splitlines() == [
        f"chatdb: warning: {db_path} could be read by others (mode 0644); "
        "it is now readable by its owner only (0600)"]
    assert stat.S_IMODE(os.stat(db_path).st_mode) == 0o600
    assert chatdb("list").stderr == ""


def test_unknown_command_is_a_usage_error(chatdb):
    result = chatdb("frobnicate")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


def test_missing_argument_is_a_usage_error(chatdb):
    assert chatdb("show").returncode == 2
    assert chatdb("list", "--limit", "0").returncode == 2


def test_db_before_and_after_the_subcommand(chatdb, sample, db_path):
    before = chatdb("--db", db_path, "list", "--json", db=False).json()
    after = chatdb("list", "--json", "--db", db_path, db=False).json()
    assert before == after
    assert len(before) == 3


def test_db_from_chatdb_db_env(chatdb, sample, db_path):
    listed = chatdb("list", "--json", db=False, env={"CHATDB_DB": str(db_path)}).json()
    assert {row["title"] for row in listed} == {"Rust questions", "Trip to Kyoto", "Borrowing"}


def test_db_option_wins_over_env(chatdb, sample, db_path, tmp_path):
    other = tmp_path / "other.db"
    listed = chatdb("list", "--json", "--db", db_path, db=False,
                            env={"CHATDB_DB": str(other)}).json()
    assert len(listed) == 3


def test_default_db_is_under_xdg_data_home(chatdb, cli_env, tmp_path):
    default = tmp_path / "xdg" / "chatdb" / "chatdb.db"
    # a command that only reads names the archive it looked for, and makes none
    assert f"{default}: no archive there" in chatdb("rename", "1", "x", db=False).error()
    assert not (tmp_path / "xdg").exists()
    with Archive.open(default) as archive:
        conv = archive.create_conversation("made here")
    listed = chatdb("list", "--json", db=False).json()
    assert [row["id"] for row in listed] == [conv.id]


def test_unknown_conversation_is_one_line_exit_1(chatdb, sample):
    assert "no conversation 99" in chatdb("show", "99").error()
    assert "no conversation 'nope'" in chatdb("show", "nope").error()
    assert "no conversation" in chatdb("show", "99999999999999999999999").error()


def test_not_an_archive_is_one_line_exit_1(chatdb, tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    line = chatdb("list", "--db", junk, db=False).error()
    assert "junk.db" in line
    assert junk.read_bytes() == b"this is not sqlite" * 100


def test_a_directory_as_db_is_one_line_exit_1(chatdb, tmp_path):
    chatdb("list", "--db", tmp_path, db=False).error()


READ_SYSCALL = {"x86_64": 0, "aarch64": 63}.get(platform.machine())


def reading_stdin(pid: int) -> bool:
    """Whether the process is blocked in read(0, ...) (Linux's /proc/PID/syscall)."""
    fields = Path(f"/proc/{pid}/syscall").read_text().split()
    return fields[:2] == [str(READ_SYSCALL), "0x0"]


@pytest.mark.skipif(READ_SYSCALL is None or not Path("/proc/self/syscall").exists(),
                    reason="needs Linux's /proc/PID/syscall on x86-64 or arm64")
@pytest.mark.timeout(120)
def test_ctrl_c_exits_130_without_traceback(chatdb):
    # `import -` waits on stdin, an open pipe nobody writes to: interrupt it there.
    process = subprocess.Popen(chatdb.argv("import", "-"), cwd=chatdb.cwd, env=chatdb.env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: reading_stdin(process.pid), what="the read of stdin")  # past the imports, in the read
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 130, stderr
    assert b"Traceback" not in stderr


def test_closed_output_pipe_is_quiet(chatdb, archive):
    for n in range(3000):
        archive.create_conversation(f"conversation {n}")
    reader = subprocess.Popen(["head", "-n", "1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    writer = subprocess.run(chatdb.argv("list"), cwd=chatdb.cwd, env=chatdb.env,
                            stdout=reader.stdin, stderr=subprocess.PIPE, timeout=60)
    reader.stdin.close()
    reader.wait(timeout=30)
    assert b"Traceback" not in writer.stderr
    assert writer.returncode in (0, 141)


def test_json_output_is_utf8(chatdb, archive):
    archive.create_conversation("京都 ☕")
    listed = chatdb("list", "--json", env={"LC_ALL": "C", "LANG": "C"}).json()
    assert listed[0]["title"] == "京都 ☕"
