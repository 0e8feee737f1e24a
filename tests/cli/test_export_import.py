"""`chatdb export` and `chatdb import`: formats, round trips, ChatGPT files, bad files."""

import copy
import json
import stat
import zipfile

import pytest

from chatdb.archive import Archive
from chatdb.clock import from_unix

NODE_TIME = 1_700_000_000.0  # as in conftest's ChatGPT fixture


def test_export_json_has_every_branch_linked_by_uid(chatdb, sample, archive):
    document = chatdb("export").json()
    assert document["format"] == "chatdb-export" and document["version"] == 1
    convs = {c["title"]: c for c in document["conversations"]}
    assert set(convs) == {"Rust questions", "Trip to Kyoto", "Borrowing"}
    rust = convs["Rust questions"]
    by_uid = {m["uid"]: m for m in rust["messages"]}
    first, second = archive.message(sample.first_answer), archive.message(sample.second_answer)
    question = archive.message(sample.question)
    assert by_uid[first.uid]["parent"] == by_uid[second.uid]["parent"] == question.uid
    assert rust["head"] == second.uid
    assert rust["system_prompt"] == "Be brief." and rust["model"] == "smol"
    assert by_uid[question.uid]["conversation"] == rust["uid"]
    for key in ("uid", "created_at", "updated_at", "meta"):
        assert key in rust
    for key in ("uid", "parent", "role", "content", "status", "created_at", "meta"):
        assert key in rust["messages"][0]
    assert convs["Borrowing"]["meta"]["forked_from"] == first.uid  # a uid, not a row id
    trip = convs["Trip to Kyoto"]
    assert trip["messages"][-1]["status"] == "interrupted"


def test_export_named_conversations_and_json_flag(chatdb, sample):
    document = chatdb("export", sample.trip, "--json").json()
    assert [c["title"] for c in document["conversations"]] == ["Trip to Kyoto"]
    assert "no conversation 99" in chatdb("export", sample.trip, "99").error()


def test_export_to_file(chatdb, sample, tmp_path):
    target = tmp_path / "out" / "chats.json"
    target.parent.mkdir()
    result = chatdb("export", "-o", target)
    assert result.returncode == 0
    assert result.stdout.strip() == f"exported 3 conversations (7 messages) to {target}"
    assert json.loads(target.read_text()) == chatdb("export").json()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in target.parent.iterdir()] == ["chats.json"]  # no temporary left
    summary = chatdb("export", sample.rust, "-o", target, "--json").json()
    assert summary == {"path": str(target), "format": "json", "conversations": 1, "messages": 4}


def test_export_to_unwritable_place(chatdb, sample, tmp_path):
    assert "No such file or directory" in chatdb("export", "-o", tmp_path / "no" / "x.json").error()


def test_export_markdown(chatdb, sample):
    result = chatdb("export", sample.rust, "--format", "markdown")
    assert result.returncode == 0
    text = result.stdout
    assert text.startswith("# Rust questions\n")
    assert "## System\n\nBe brief." in text
    assert "## User\n\nWhat is a lifetime?" in text
    assert "They name regions of code." in text            # the current path...
    assert "the scope a borrow lives in" not in text       # ...not the other branch
    both = chatdb("export", sample.rust, sample.trip, "--format", "markdown")
    assert both.returncode == 0, both.stderr
    both = both.stdout
    assert both.count("\n---\n") == 1 and "## Assistant (interrupted)" in both
    assert chatdb("export", "--format", "markdown", "--json").returncode == 2


def test_round_trip_is_exact(chatdb, sample, tmp_path):
    exported = tmp_path / "a.json"
    chatdb("export", "-o", exported)
    other = tmp_path / "b.db"
    report = chatdb("import", exported, "--json", "--db", other, db=False).json()
    assert report == {"file": str(exported), "format": "chatdb", "conversations": 3,
                      "messages": 7, "duplicate_conversations": 0, "duplicate_messages": 0,
                      "skipped": 0}
    again = chatdb("export", "--db", other, db=False).json()
    assert again == json.loads(exported.read_text())
    # The fork still shares its history in the new archive: deleting the
    # original removes only the branch nobody else reaches.
    rust_b = next(c for c in chatdb("list", "--json", "--db", other, db=False).json()
                  if c["title"] == "Rust questions")
    assert chatdb("delete", rust_b["id"], "--json", "--db", other, db=False).json()[
        "messages_removed"] == 1


def test_importing_twice_adds_nothing(chatdb, sample, tmp_path):
    exported = tmp_path / "a.json"
    chatdb("export", "-o", exported)
    before = chatdb("export").json()
    report = chatdb("import", exported, "--json").json()
    assert (report["conversations"], report["messages"]) == (0, 0)
    assert (report["duplicate_conversations"], report["duplicate_messages"]) == (3, 7)
    assert chatdb("export").json() == before
    text = chatdb("import", exported).stdout
    assert "imported 0 conversations and 0 messages" in text
    assert "already in the archive: 3 conversations, 7 messages" in text


def test_import_from_stdin(chatdb, sample, tmp_path):
    document = chatdb("export", sample.trip).stdout
    other = tmp_path / "b.db"
    report = chatdb("import", "-", "--json", "--db", other, db=False, input=document).json()
    assert report["file"] == "<stdin>" and report["conversations"] == 1


# -- ChatGPT ---------------------------------------------------------------


def _write(tmp_path, document, name="conversations.json"):
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


def test_chatgpt_import_keeps_every_branch(chatdb, chatgpt_export, tmp_path):
    path = _write(tmp_path, chatgpt_export)
    report = chatdb("import", path, "--json").json()
    assert report["format"] == "chatgpt"
    assert (report["conversations"], report["messages"], report["skipped"]) == (2, 10, 3)
    listed = chatdb("list", "--json").json()
    assert [c["title"] for c in listed] == ["SQLite haiku", "Kyoto trip"]  # by update time
    kyoto_id = listed[1]["id"]

    path_now = chatdb("show", kyoto_id, "--json").json()
    assert path_now["created_at"] == from_unix(NODE_TIME)
    assert path_now["updated_at"] == from_unix(NODE_TIME + 95)
    assert path_now["model"] == "gpt-4o"
    assert path_now["uid"] == "chatgpt:conv-kyoto"
    assert [m["content"] for m in path_now["messages"]] == [
        "Plan a three-day trip to Kyoto",
        "Day 1: Kinkaku-ji, the Golden Pavilion",      # the regenerated answer
        "Add food tips for vegetarians",               # the edited question
        "Shigetsu at Tenryu-ji serves shojin ryori",   # current_node, below two tool nodes
    ]
    head = path_now["messages"][-1]
    assert head["id"] == path_now["head_id"] and head["status"] == "interrupted"
    assert head["created_at"] == from_unix(NODE_TIME + 90)

    tree = chatdb("show", kyoto_id, "--all", "--json").json()["messages"]
    by_text = {m["content"]: m for m in tree}
    assert len(tree) == 8
    question = by_text["Plan a three-day trip to Kyoto"]
    assert question["parent_id"] is None  # the hidden system node and empty root are gone
    answers = [m for m in tree if m["parent_id"] == question["id"]]
    assert {m["content"] for m in answers} == {"Day 1: Fushimi Inari",
                                               "Day 1: Kinkaku-ji, the Golden Pavilion"}
    edits = [m for m in tree if m["parent_id"] == by_text["Day 1: Kinkaku-ji, the Golden Pavilion"]["id"]]
    assert {m["content"] for m in edits} == {"Add food tips", "Add food tips for vegetarians"}
    assert by_text["Try yudofu near Nanzen-ji"]["parent_id"] == by_text["Add food tips"]["id"]
    image = by_text["Which temple is this?"]
    assert image["parent_id"] == by_text["Day 1: Fushimi Inari"]["id"]
    assert image["meta"]["omitted_parts"] == 1
    assert by_text["Day 1: Fushimi Inari"]["meta"]["model"] == "gpt-4o"

    haiku = chatdb("show", listed[0]["id"], "--json").json()
    assert haiku["uid"] == "chatgpt:conv-haiku"
    assert haiku["messages"][1]["content"].count("\n") == 2


def test_chatgpt_import_twice_adds_nothing(chatdb, chatgpt_export, tmp_path):
    path = _write(tmp_path, chatgpt_export)
    assert chatdb("import", path).returncode == 0
    before = chatdb("export").json()
    report = chatdb("import", path, "--json").json()
    assert (report["conversations"], report["messages"]) == (0, 0)
    assert (report["duplicate_conversations"], report["duplicate_messages"]) == (2, 10)
    assert chatdb("export").json() == before


def test_chatgpt_zip(chatdb, chatgpt_export, tmp_path):
    path = tmp_path / "chatgpt-export.zip"
    with zipfile.ZipFile(path, "w") as bundle:
        bundle.writestr("chat.html", "<html></html>")
        bundle.writestr("conversations.json", json.dumps(chatgpt_export))
    assert chatdb("import", path, "--json").json()["messages"] == 10


def test_chatgpt_export_round_trips_through_chatdb_export(chatdb, chatgpt_export, tmp_path):
    chatdb("import", _write(tmp_path, chatgpt_export))
    first = chatdb("export").stdout
    other = tmp_path / "b.db"
    chatdb("import", "-", "--db", other, db=False, input=first)
    assert chatdb("export", "--db", other, db=False).stdout == first


# -- files that must change nothing ----------------------------------------


def _broken_chatgpt(chatgpt_export, breakage):
    document = copy.deepcopy(chatgpt_export)
    breakage(document)
    return json.dumps(document)


def _cycle(doc):
    mapping = doc[1]["mapping"]
    mapping["h0"]["parent"] = "h2"  # h0 -> h2 -> h1 -> h0


def _bad_role(doc):
    doc[1]["mapping"]["h2"]["message"]["author"]["role"] = 7


def _dangling(doc):
    doc[1]["mapping"]["h2"]["parent"] = "gone"


def _missing_mapping(doc):
    del doc[1]["mapping"]


BROKEN = {
    "not json": (lambda export: "{ this is not json", "not valid JSON (line 1"),
    "not utf-8": (lambda export: b"\xff\xfe\x00garbage", "not UTF-8"),
    "a number": (lambda export: "42", "the top level is a number"),
    "an object": (lambda export: '{"hello": 1}', "neither a chatdb export nor"),
    "missing mapping": (lambda export: _broken_chatgpt(export, _missing_mapping),
                        'conversation 2 ("SQLite haiku"): missing "mapping"'),
    "dangling parent": (lambda export: _broken_chatgpt(export, _dangling),
                        'conversation 2 ("SQLite haiku"): node "h2": parent "gone" is not in "mapping"'),
    "cycle": (lambda export: _broken_chatgpt(export, _cycle),
              'conversation 2 ("SQLite haiku"): node "h'),
    "bad role type": (lambda export: _broken_chatgpt(export, _bad_role),
                      'conversation 2 ("SQLite haiku"): node "h2": "role" is an integer, expected a string'),
    "conversation not an object": (lambda export: json.dumps([export[0], "x"]),
                                   "conversation 2: is not an object"),
    "bad time": (lambda export: _broken_chatgpt(export, lambda d: d[0].update(create_time="yesterday")),
                 '"create_time" is a string, expected a number'),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_file_changes_nothing(chatdb, sample, chatgpt_export, tmp_path, db_path, case):
    make, expected = BROKEN[case]
    content = make(chatgpt_export)
    path = tmp_path / "conversations.json"
    (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
    before = chatdb("export").stdout
    line = chatdb("import", path).error()
    assert f"chatdb: error: {path}: " in line
    assert expected in line, line
    if case == "cycle":
        assert "cycle" in line
    assert chatdb("export").stdout == before
    with Archive.open(db_path) as archive:
        assert (archive.count_conversations(), archive.count_messages()) == (3, 7)


def test_failure_half_way_through_writing_rolls_back(chatdb, sample, tmp_path, db_path):
    """The first conversation is written before the second proves broken: all undone."""
    document = chatdb("export", sample.rust).json()
    fresh = tmp_path / "fresh.db"
    good = copy.deepcopy(document["conversations"][0])
    bad = copy.deepcopy(good)
    bad["uid"] = "another"
    for message in bad["messages"]:
        message["uid"] += "-copy"
        message["conversation"] = "another"
        if message["parent"]:
            message["parent"] += "-copy"
    bad["messages"][2]["parent"] = "nowhere"
    bad["head"] = bad["messages"][-1]["uid"]
    document["conversations"] = [good, bad]
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps(document))
    line = chatdb("import", path, "--db", fresh, db=False).error()
    assert 'conversation 2 ("Rust questions"): message "' in line
    assert 'parent "nowhere" is neither in the file nor in the archive' in line
    with Archive.open(fresh) as archive:
        assert (archive.count_conversations(), archive.count_messages()) == (0, 0)


def test_unreadable_import_file(chatdb, tmp_path):
    assert "No such file or directory" in chatdb("import", tmp_path / "nope.json").error()


def test_newer_export_version_is_refused(chatdb, sample, tmp_path):
    document = chatdb("export").json()
    document["version"] = 99
    path = tmp_path / "future.json"
    path.write_text(json.dumps(document))
    assert "version 99" in chatdb("import", path).error()
