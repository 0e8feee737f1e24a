"""`chatdb fork`, `chatdb delete` and `chatdb rename`."""

from chatdb.archive import Archive


def test_fork_prints_the_new_conversation_id(chatdb, sample, db_path):
    result = chatdb("fork", sample.question)
    assert result.returncode == 0 and result.stderr == ""
    new_id = int(result.stdout.strip())
    with Archive.open(db_path) as archive:
        forked = archive.conversation(new_id)
        assert forked.head_id == sample.question
        assert forked.title == "Rust questions (fork)"
        assert [m.id for m in archive.messages(new_id)][-1] == sample.question


def test_fork_json_with_title(chatdb, sample):
    forked = chatdb("fork", sample.first_answer, "--title", "Another angle", "--json").json()
    assert forked["title"] == "Another angle"
    assert forked["head_id"] == sample.first_answer
    assert {"id", "uid", "created_at", "updated_at"} <= set(forked)
    shown = chatdb("show", forked["id"], "--json").json()
    assert shown["messages"][-1]["id"] == sample.first_answer


def test_fork_by_message_uid(chatdb, sample, archive):
    uid = archive.message(sample.question).uid
    assert chatdb("fork", uid, "--json").json()["head_id"] == sample.question


def test_fork_unknown_message(chatdb, sample):
    assert "no message 999" in chatdb("fork", "999").error()
    assert "no message 'zz'" in chatdb("fork", "zz").error()


def test_delete_reports_messages_removed(chatdb, sample, db_path):
    result = chatdb("delete", sample.trip)
    assert result.returncode == 0
    assert result.stdout.strip() == f"deleted conversation {sample.trip}; 2 messages removed"
    assert "no conversation" in chatdb("show", sample.trip).error()


def test_delete_json_keeps_what_forks_share(chatdb, sample):
    deleted = chatdb("delete", sample.rust, "--json").json()
    # Only the second answer goes: the fork reaches the system prompt, the
    # question and the first answer.
    assert deleted == {"id": sample.rust, "uid": deleted["uid"], "title": "Rust questions",
                       "messages_removed": 1}
    shown = chatdb("show", sample.fork, "--json").json()
    assert [m["id"] for m in shown["messages"]][1:3] == [sample.question, sample.first_answer]


def test_delete_unknown(chatdb, sample):
    assert "no conversation 77" in chatdb("delete", "77").error()


def test_rename(chatdb, sample):
    result = chatdb("rename", sample.trip, "Kyoto in spring")
    assert result.returncode == 0
    assert "Kyoto in spring" in result.stdout
    renamed = chatdb("rename", sample.trip, "Kyoto, again", "--json").json()
    assert renamed["id"] == sample.trip and renamed["title"] == "Kyoto, again"
    assert chatdb("list", "--json").json()[0]["title"] == "Kyoto, again"  # now the most recent


def test_rename_unknown(chatdb, sample):
    assert "no conversation 5" in chatdb("rename", "5", "x").error()
