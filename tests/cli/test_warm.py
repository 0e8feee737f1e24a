"""`chatdb warm` and `import --warm`: imported chats get their KV, several per forward pass,
and then resume at once."""

import io
import json

from chatdb.archive import Archive
from cli.progress import ProgressBar


def _imported(chatdb, chatgpt_export, tmp_path, *extra):
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(chatgpt_export))
    return chatdb("import", path, "--json", *extra).json()


def _stored_at_head(db_path) -> dict:
    """conversation id -> whether KV is stored up to its head message."""
    with Archive.open(db_path) as archive:
        fingerprints = {r[0] for r in archive.conn.execute("SELECT fingerprint FROM kv_segments")}
        heads = {c.id: archive.conversation(c.id).head_id for c in archive.list_conversations()}
        return {conv: any(getattr(archive.kv.deepest_restorable(head, fp), "message_id", None) == head
                          for fp in fingerprints)
                for conv, head in heads.items()}


def test_warm_stores_the_kv_of_imported_chats_and_each_then_resumes_at_once(
        chatdb, chatgpt_export, tmp_path, db_path):
    _imported(chatdb, chatgpt_export, tmp_path)
    assert set(_stored_at_head(db_path).values()) <= {False}
    first = chatdb("warm", "--parallel", "2", "--ctx", "1024", "--json").json()  # no bar in a pipe
    assert sorted(first["warmed"]) == [1, 2] and first["computed_tokens"] > 20
    assert first["most_sequences"] == 2          # both read in the same forward passes
    assert _stored_at_head(db_path) == {1: True, 2: True}
    again = chatdb("warm", "--ctx", "1024", "--json").json()
    assert again["warmed"] == [] and sorted(again["already"]) == [1, 2]
    assert again["computed_tokens"] == 0
    # The next turn of a warmed chat restores its whole path and computes only the new message.
    turn = chatdb("ask", "--conv", "1", "--json", "--temperature", "0", "--max-tokens", "4",
                  "--ctx", "1024", "Thanks").json()
    with Archive.open(db_path) as archive:
        path_before = archive.path(archive.message(turn["user_message_id"]).parent_id)
    assert turn["kv"]["source"] == "archive"
    assert turn["kv"]["restored_tokens"] > 20 and turn["kv"]["computed_tokens"] < 16
    assert len(path_before) >= 3


def test_import_warm_and_a_text_summary(chatdb, chatgpt_export, tmp_path, db_path):
    done = _imported(chatdb, chatgpt_export, tmp_path, "--warm", "--ctx", "1024", "--parallel", "2")
    assert done["conversations"] == 2 and sorted(done["warm"]["warmed"]) == [1, 2]
    assert _stored_at_head(db_path) == {1: True, 2: True}
    text = chatdb("warm", "1", "--ctx", "1024")
    assert text.returncode == 0 and text.stderr == ""
    assert text.stdout.startswith("stored the KV of 0 conversations") and "1 had it already" in text.stdout


def test_warm_names_a_missing_conversation(chatdb, chatgpt_export, tmp_path):
    _imported(chatdb, chatgpt_export, tmp_path)
    assert "99" in chatdb("warm", "99").error()


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_progress_bar_draws_on_a_terminal_only(monkeypatch):
    monkeypatch.delenv("TERM", raising=False)
    screen, pipe = Terminal(), io.StringIO()
    for stream in (screen, pipe):
        bar = ProgressBar("warming", stream)
        for done in (0, 50, 50, 100):
            bar.update(done, 100)
        bar.close()
    assert pipe.getvalue() == ""
    assert screen.getvalue().count("\r") == 3 and screen.getvalue().endswith("100/100 tokens\n")


def test_warm_takes_the_most_recent_first_and_stops_at_the_budget_saying_so(
        chatdb, chatgpt_export, tmp_path, db_path):
    _imported(chatdb, chatgpt_export, tmp_path)
    chatdb("kv", "budget", "2MiB")   # the short, most recent chat's KV fits; the older one's not
    done = chatdb("warm", "--ctx", "1024", "--parallel", "2", "--json").json()
    with Archive.open(db_path) as archive:
        recent, older = [c.id for c in archive.list_conversations()]
        assert done["warmed"] == [recent] and done["over_budget"] == [older]
        assert done["budget_bytes"] == 2 << 20
        assert archive.kv_keeping.stored_bytes() <= 2 << 20
        used = archive.conn.execute("SELECT used_at FROM kv_uses").fetchall()
        assert [r[0] for r in used] == [archive.conversation(recent).updated_at]  # when last used
    text = chatdb("warm", "--ctx", "1024")
    assert "stopped at the KV budget (2.0 MiB): 1 older left to read when next used" in text.stdout
