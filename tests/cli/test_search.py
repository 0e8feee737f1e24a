"""`chatdb search`: hits as text (highlighted or **marked**) and as JSON."""

import os
import pty
import subprocess


def test_search_json(chatdb, sample):
    hits = chatdb("search", "lifetime", "--json").json()
    assert {h["message_id"] for h in hits} == {sample.question, sample.first_answer}
    for hit in hits:
        assert {"conversation_id", "message_id", "role", "snippet", "title", "created_at",
                "score"} <= set(hit)
        assert "**lifetime**" in hit["snippet"].lower()
        assert "\x02" not in hit["snippet"] and "\x03" not in hit["snippet"]
        assert hit["conversation_id"] == sample.rust and hit["title"] == "Rust questions"


def test_search_filters(chatdb, sample):
    by_role = chatdb("search", "lifetime", "--role", "assistant", "--json").json()
    assert [h["message_id"] for h in by_role] == [sample.first_answer]
    in_trip = chatdb("search", "lifetime", "--conv", sample.trip, "--json").json()
    assert in_trip == []
    assert len(chatdb("search", "lifetime", "--limit", "1", "--json").json()) == 1


def test_search_dates(chatdb, sample):
    # The sample's Rust messages are from 2024-03-01, its Kyoto ones from 2024-04-02.
    def found(*args):
        return {h["message_id"] for h in chatdb("search", *args, "--json").json()}
    assert found("lifetime", "--until", "2024-03-01") == {sample.question, sample.first_answer}
    assert found("lifetime", "--since", "2024-03-02") == set()
    assert len(found("Kyoto", "--since", "2024-04-02")) == 1
    assert found("Kyoto", "--since", "2024-04-02T09:00:01.5Z") == set()
    assert found("Kyoto", "--until", "2024-04-01") == set()
    assert "last tuesday" in chatdb("search", "x", "--since", "last tuesday").error()
    assert "before" in chatdb("search", "x", "--since", "2024-05-02", "--until", "2024-05-01").error()


def test_search_text_without_terminal_marks_with_stars(chatdb, sample):
    result = chatdb("search", "borrow", "checker")
    assert result.returncode == 0, result.stderr
    assert "**" in result.stdout and "\x1b[" not in result.stdout
    assert "Borrowing" in result.stdout


def test_search_no_hits(chatdb, sample):
    result = chatdb("search", "zeppelin")
    assert result.returncode == 0 and result.stdout == ""
    assert chatdb("search", "zeppelin", "--json").json() == []


def _on_terminal(chatdb, *args, env=None):
    """Run with stdout on a pseudo-terminal; returns what it printed."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(chatdb.argv(*args), cwd=chatdb.cwd, stdout=follower,
                               stderr=subprocess.PIPE, env={**chatdb.env, **(env or {})})
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait(timeout=60)
    os.close(leader)
    return b"".join(chunks).decode()


def test_search_on_a_terminal_uses_colour_unless_no_color(chatdb, sample):
    coloured = _on_terminal(chatdb, "search", "lifetime", env={"TERM": "xterm"})
    assert "\x1b[" in coloured and "**" not in coloured
    plain = _on_terminal(chatdb, "search", "lifetime", env={"TERM": "xterm", "NO_COLOR": "1"})
    assert "\x1b[" not in plain and "**" in plain
