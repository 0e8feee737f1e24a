"""`chatdb tag/untag/pin/unpin/archive/unarchive/tags`, `list --tag/--pinned/--archived`,
`search --tag` and tag:NAME, and tags through export and import: the real command."""

import json

import pytest


def ids(rows):
    return [row["id"] for row in rows]


def test_tag_list_and_untag(chatdb, sample):
    assert chatdb("tag", sample.trip, "Travel", "japan trip", "--json").json()["tags"] == \
        ["japan trip", "Travel"]
    assert chatdb("tag", sample.rust, "travel").returncode == 0
    assert ids(chatdb("list", "--tag", "TRAVEL", "--json").json()) == [sample.trip, sample.rust]
    assert ids(chatdb("list", "--tag", "travel", "--tag", "Japan Trip", "--json").json()) == [sample.trip]
    listed = chatdb("list", "--json").json()
    assert set(listed[0]) == {"id", "title", "updated_at", "message_count", "owner", "pinned", "archived", "tags"}
    assert {row["id"]: row["tags"] for row in listed}[sample.fork] == []
    text = chatdb("list", "--tag", "travel").stdout
    assert '#"japan trip" #Travel' in text
    assert chatdb("tags", "--json").json() == [{"tag": "Travel", "conversations": 2},
                                               {"tag": "japan trip", "conversations": 1}]
    assert chatdb("untag", sample.rust, "TRAVEL", "--json").json()["tags"] == []
    assert chatdb("tags").stdout.splitlines() == ["1  japan trip", "1  Travel"]


def test_pin_first_archive_hidden(chatdb, sample):
    assert ids(chatdb("list", "--json").json()) == [sample.fork, sample.trip, sample.rust]
    assert chatdb("pin", sample.rust).stdout.strip() == f"pinned conversation {sample.rust}"
    assert chatdb("archive", sample.trip, "--json").json()["archived"] is True
    assert ids(chatdb("list", "--json").json()) == [sample.rust, sample.fork]
    assert ids(chatdb("list", "--pinned", "--json").json()) == [sample.rust]
    assert ids(chatdb("list", "--archived", "--json").json()) == [sample.trip]
    assert "pinned Rust questions" in chatdb("list").stdout
    chatdb("unpin", sample.rust)
    chatdb("unarchive", sample.trip)
    assert ids(chatdb("list", "--json").json()) == [sample.fork, sample.trip, sample.rust]


@pytest.mark.parametrize("bad, said", [
    ("x" * 10_000, "at most 100 characters"),
    ("tab\there", "control character"),
    ("", "cannot be empty"),
    ("half \udcff a pair", "not valid UTF-8 text (byte 0xff"),   # argv's byte, as Python reads it
])
def test_a_bad_tag_is_one_line_and_exit_2(chatdb, sample, bad, said):
    chatdb("tag", sample.rust, "kept")
    assert said in chatdb("tag", sample.rust, "fine", bad).error(2)
    assert said in chatdb("list", "--tag", bad).error(2)
    assert said in chatdb("search", "lifetime", "--tag", bad).error(2)
    assert chatdb("list", "--tag", "kept", "--json").json()[0]["tags"] == ["kept"]


def test_tag_and_untag_say_what_each_does(chatdb):
    assert "Give a conversation tags" in chatdb("tag", "--help", db=False).stdout
    untag = chatdb("untag", "--help", db=False).stdout
    assert "Take tags off a conversation" in untag and "Give" not in untag


def test_search_by_tag_and_tag_terms(chatdb, sample):
    chatdb("tag", sample.trip, "travel")
    chatdb("tag", sample.rust, "machine learning")
    everywhere = {h["conversation_id"] for h in chatdb("search", "lifetime OR Kyoto", "--json").json()}
    assert sample.trip in everywhere and sample.rust in everywhere
    by_option = chatdb("search", "lifetime OR Kyoto", "--tag", "Travel", "--json").json()
    assert {h["conversation_id"] for h in by_option} == {sample.trip}
    in_query = chatdb("search", 'tag:"Machine Learning" lifetime OR Kyoto', "--by", "words", "--json").json()
    assert {h["conversation_id"] for h in in_query} == {sample.rust}
    assert "give the words" in chatdb("search", "tag:travel").error(2)


def test_tags_pins_and_archived_go_through_export_and_import(chatdb, sample, tmp_path):
    chatdb("tag", sample.rust, "Rust", "learning")
    chatdb("pin", sample.rust)
    chatdb("archive", sample.trip)
    exported = tmp_path / "all.json"
    assert chatdb("export", "-o", exported).returncode == 0
    document = json.loads(exported.read_text())
    by_title = {c["title"]: c for c in document["conversations"]}
    assert by_title["Rust questions"]["tags"] == ["learning", "Rust"]
    assert by_title["Rust questions"]["pinned"] is True
    assert by_title["Trip to Kyoto"]["archived"] is True
    assert by_title["Borrowing"]["tags"] == []      # forked before the tags were given
    other = tmp_path / "other.db"
    assert chatdb("import", exported, "--db", other, db=False).returncode == 0
    listed = chatdb("list", "--json", "--db", other, db=False).json()
    assert [(r["title"], r["tags"], r["pinned"]) for r in listed] == [
        ("Rust questions", ["learning", "Rust"], True), ("Borrowing", [], False)]
    assert [r["title"] for r in chatdb("list", "--archived", "--json", "--db", other, db=False).json()] \
        == ["Trip to Kyoto"]


def test_importing_again_adds_the_new_tags_and_keeps_the_ones_given_since(chatdb, sample, tmp_path):
    chatdb("tag", sample.rust, "Rust")
    exported, other = tmp_path / "all.json", tmp_path / "other.db"
    chatdb("export", "-o", exported)
    assert chatdb("import", exported, "--db", other, db=False).returncode == 0
    copy = next(r["id"] for r in chatdb("list", "--json", "--db", other, db=False).json()
                if r["title"] == "Rust questions")
    chatdb("tag", copy, "kept here", "--db", other, db=False)
    chatdb("tag", sample.rust, "learning")
    chatdb("export", "-o", exported)
    assert chatdb("import", exported, "--db", other, db=False).returncode == 0
    listed = {r["title"]: r["tags"] for r in chatdb("list", "--json", "--db", other, db=False).json()}
    assert listed["Rust questions"] == ["kept here", "learning", "Rust"]
    assert len(listed) == 3    # the same conversations, none twice


def test_an_export_with_a_bad_tag_is_refused_whole(chatdb, sample, tmp_path):
    chatdb("tag", sample.rust, "fine")
    exported = tmp_path / "all.json"
    chatdb("export", "-o", exported)
    document = json.loads(exported.read_text())
    document["conversations"][0]["tags"] = ["ok", "bad\nline"]
    exported.write_text(json.dumps(document))
    other = tmp_path / "other.db"
    said = chatdb("import", exported, "--db", other, db=False).error()
    assert '"tags": a tag cannot hold a control character' in said


def test_chatgpt_archived_flag_is_kept(chatdb, chatgpt_export, tmp_path):
    chatgpt_export[1]["is_archived"] = True
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(chatgpt_export))
    assert chatdb("import", path).returncode == 0
    assert [r["title"] for r in chatdb("list", "--json").json()] == ["Kyoto trip"]
    assert [r["title"] for r in chatdb("list", "--archived", "--json").json()] == ["SQLite haiku"]
