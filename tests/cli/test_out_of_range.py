"""Numbers beyond SQLite's INTEGER, wherever a number is taken: one line, status 1 or 2, nothing lost."""

import pytest

from chatdb.archive import Archive

HUGE = "99999999999999999999999"   # past 2**63 - 1: binding it raised OverflowError


@pytest.mark.parametrize("args, status", [
    (("list", "--limit", HUGE), 2),
    (("search", "lifetime", "--limit", HUGE), 2),
    (("ask", "--conv", HUGE, "hi"), 1),
    (("ask", "--fork-from", HUGE, "hi"), 1),
    (("show", HUGE), 1),
    (("fork", HUGE), 1),
    (("ask", "--max-tokens", HUGE, "hi"), 2),
])
def test_a_command_given_a_huge_number(chatdb, db_path, sample, args, status):
    before = _counts(db_path)
    result = chatdb(*args)
    assert result.returncode == status, result.stderr
    assert "Traceback" not in result.stderr and "OverflowError" not in result.stderr
    assert HUGE in result.stderr.splitlines()[-1]
    assert _counts(db_path) == before


def test_slash_commands_given_a_huge_number(chatdb, db_path, sample):
    before = _counts(db_path)
    commands = [f"/list {HUGE}", f"/switch {HUGE}", f"/switch #{HUGE}", f"/delete #{HUGE}",
                f"/open {HUGE}", f"/switch #{sample.rust}", f"/history {HUGE}", f"/edit {HUGE} x",
                f"/fork {HUGE}", "/list"]
    result = chatdb("--max-tokens", "4", input="\n".join(commands) + "\n")
    assert result.returncode == 1  # the console went on to the end, then said lines failed
    assert "Traceback" not in result.stderr and "OverflowError" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 8, result.stderr
    assert all(HUGE in line or "no search yet" in line for line in errors), errors
    assert "Trip to Kyoto" in result.stdout + result.stderr   # the last /list ran
    assert _counts(db_path) == before


def _counts(db_path) -> "tuple[int, int]":
    with Archive.open(db_path) as archive:
        return archive.count_conversations(), archive.count_messages()
