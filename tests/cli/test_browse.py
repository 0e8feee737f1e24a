"""`chatdb list` and `chatdb show`, as text and as JSON."""

import json


def test_list_json_most_recent_first(chatdb, sample):
    listed = chatdb("list", "--json").json()
    assert [row["id"] for row in listed] == [sample.fork, sample.trip, sample.rust]
    assert set(listed[0]) == {"id", "title", "updated_at", "message_count", "owner",
                              "pinned", "archived", "tags"}
    by_id = {row["id"]: row for row in listed}
    # The current path but its system prompt, as the console numbers it.
    assert by_id[sample.rust]["message_count"] == 2   # question, second answer
    assert by_id[sample.fork]["message_count"] == 3   # question, first answer, follow-up
    assert by_id[sample.trip]["message_count"] == 2   # no system prompt: both count
    assert by_id[sample.trip]["title"] == "Trip to Kyoto"


def test_list_limit(chatdb, sample):
    assert [row["id"] for row in chatdb("list", "--limit", "1", "--json").json()] == [sample.fork]


def test_list_shows_a_page_unless_asked_for_all(chatdb, archive):
    made = [archive.create_conversation(f"chat {i}").id for i in range(52)]
    newest = made[::-1]
    page = chatdb("list", "--json")
    assert page.returncode == 0 and [row["id"] for row in json.loads(page.stdout)] == newest[:50]
    assert page.stderr == "chatdb: showing the first 50; --limit N or --all shows more\n"
    assert [row["id"] for row in chatdb("list", "--all", "--json").json()] == newest
    asked = chatdb("list", "--limit", "51")   # a page asked for needs no word
    assert len(asked.stdout.splitlines()) == 51 and asked.stderr == ""
    assert chatdb("list", "--limit", "2", "--all").returncode == 2


def test_list_text(chatdb, sample):
    result = chatdb("list")
    assert result.returncode == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert len(lines) == 3
    assert lines[0].split()[0] == str(sample.fork) and lines[0].endswith("Borrowing")
    assert "\x1b[" not in result.stdout  # not a terminal: no colour


def test_list_empty(chatdb, archive):
    assert chatdb("list", "--json").json() == []
    assert chatdb("list").stdout.strip() == "no conversations"


def test_show_json_is_the_current_path(chatdb, sample):
    shown = chatdb("show", sample.rust, "--json").json()
    assert shown["id"] == sample.rust and shown["title"] == "Rust questions"
    messages = shown["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant"]
    assert messages[-1]["id"] == sample.second_answer == shown["head_id"]
    assert messages[1]["parent_id"] == messages[0]["id"]
    for m in messages:
        assert {"id", "parent_id", "role", "content", "created_at", "status"} <= set(m)


def test_show_all_branches(chatdb, sample):
    shown = chatdb("show", sample.rust, "--all", "--json").json()
    ids = [m["id"] for m in shown["messages"]]
    assert sample.first_answer in ids and sample.second_answer in ids


def test_show_status_and_uid(chatdb, sample):
    uid = chatdb("show", sample.trip, "--json").json()["uid"]
    shown = chatdb("show", uid, "--json").json()
    assert shown["id"] == sample.trip
    assert shown["messages"][-1]["status"] == "interrupted"


def test_show_text(chatdb, sample):
    result = chatdb("show", sample.trip)
    assert result.returncode == 0
    assert "Trip to Kyoto" in result.stdout
    assert "Plan three days in Kyoto" in result.stdout
    assert "interrupted" in result.stdout


def test_show_text_drops_terminal_escapes(chatdb, archive):
    conv = archive.create_conversation("evil")
    archive.add_message(conv.id, "user", "hi \x1b]0;pwned\x07 there \x1b[31mred")
    result = chatdb("show", conv.id)
    assert "\x1b" not in result.stdout and "hi " in result.stdout


def test_show_unknown_conversation(chatdb, sample):
    assert "no conversation 42" in chatdb("show", "42", "--json").error()
