"""Bytes that are not UTF-8, wherever they come in: one line naming where, nothing lost."""

import json
import os

from chatdb.archive import Archive

from .conftest import Result

FAST = ("--max-tokens", "6", "--temperature", "0", "--ctx", "2048")
BAD = os.fsdecode(b"caf\xff")   # how Python hands over argv bytes that are not UTF-8


def _conversations(db_path) -> int:
    if not db_path.exists():
        return 0
    with Archive.open(db_path) as archive:
        return archive.count_conversations()


def _as_text(result: Result) -> Result:
    return Result(result.returncode, result.stdout.decode(), result.stderr.decode())


def test_binary_on_stdin_to_ask(chatdb, db_path, sample):
    line = _as_text(chatdb("ask", "-", *FAST, input=b"\x89PNG\r\n\x1a\n\xff\xfe")).error(2)
    assert "stdin is not valid UTF-8 text (byte 0x89 at offset 0" in line
    assert _conversations(db_path) == 3


def test_an_argument_that_is_not_utf8(chatdb, db_path, sample):
    assert "the message is not valid UTF-8 text (byte 0xff at character 4)" in \
        chatdb("ask", BAD, *FAST).error(2)
    assert "the search query is not valid UTF-8" in chatdb("search", BAD).error(2)
    assert "the title is not valid UTF-8" in chatdb("rename", str(sample.trip), BAD).error(2)
    assert "the tag is not valid UTF-8" in chatdb("tag", str(sample.trip), BAD).error(2)
    with Archive.open(db_path) as archive:
        assert archive.conversation(sample.trip).title == "Trip to Kyoto"
    assert _conversations(db_path) == 3


def test_a_console_on_stdin_fails_the_bad_line_and_goes_on(chatdb, db_path):
    script = b'\xff\xfe broken\n"""\nfenced \xc3\n"""\nName a fruit\n'
    result = _as_text(chatdb(*FAST, input=script))
    assert result.returncode == 1
    errors = [l for l in result.stderr.splitlines() if "error:" in l]
    assert errors == ["error: stdin line 1 is not valid UTF-8 text (byte 0xff at offset 0)",
                      "error: stdin line 3 is not valid UTF-8 text (byte 0xc3 at offset 7)"]
    with Archive.open(db_path) as archive:
        path = archive.messages(archive.latest_conversation().id)
    assert [m.content for m in path if m.role == "user"] == ["Name a fruit"]
    assert [m.role for m in path] == ["user", "assistant"]


def test_an_import_holding_a_lone_surrogate_changes_nothing(chatdb, db_path, sample, tmp_path):
    exported = json.loads(chatdb("export").stdout)
    exported["conversations"][0]["messages"][1]["content"] = "caf\ud800"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(exported), "ascii")   # the file holds the escape "\ud800"
    assert "\\ud800" in bad.read_text("ascii")
    line = chatdb("import", bad).error(1)
    assert str(bad) in line and 'message "' in line and "lone surrogate \\ud800" in line
    assert _conversations(db_path) == 3


def test_an_import_with_a_surrogate_in_meta_changes_nothing(chatdb, db_path, sample, tmp_path,
                                                           chatgpt_export):
    chatgpt_export[0]["mapping"]["a1"]["message"]["metadata"]["model_slug"] = "gpt\ud800"
    bad = tmp_path / "conversations.json"
    bad.write_text(json.dumps(chatgpt_export), "ascii")
    line = chatdb("import", bad).error(1)
    assert '"meta.model" holds a lone surrogate \\ud800' in line
    assert _conversations(db_path) == 3


def test_an_archive_already_holding_surrogates_still_exports(chatdb, db_path, sample, tmp_path):
    """As an older chatdb stored them: escaped inside meta's JSON."""
    with Archive.open(db_path) as archive:
        archive.conn.execute("UPDATE conversations SET meta = ? WHERE id = ?",
                             ('{"client": "u\\udfff"}', sample.trip))
        archive.conn.execute("UPDATE messages SET meta = ? WHERE conversation_id = ?",
                             ('{"model": "\\ud800"}', sample.trip))
    shown = chatdb("show", str(sample.trip), "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["meta"]["client"] == "u\ufffd"
    out = tmp_path / "all.json"
    exported = chatdb("export", "-o", out)
    assert exported.returncode == 0 and "lone surrogates (not text); written as U+FFFD" in exported.stderr
    assert "\ufffd" in out.read_text("utf-8")
    assert chatdb("export", "--format", "markdown").returncode == 0
    again = chatdb("import", out, "--json", "--db", tmp_path / "copy.db", db=False).json()
    assert again["conversations"] == 3
