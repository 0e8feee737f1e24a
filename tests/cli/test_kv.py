"""`chatdb kv`: the budget set, shown and applied, through the real command."""

import os

from chatdb.archive import Archive

FP = "fp"


def _stored_chat(archive, n: int, size: int = 64 << 10) -> int:
    """A conversation of `n` messages, each with `size` bytes of (random) KV rows."""
    conv = archive.create_conversation(f"chat of {n}")
    for i in range(n):
        message = archive.add_message(conv.id, "user" if i % 2 == 0 else "assistant", f"m{i}")
        archive.kv.put(message.id, FP, "rows", 7, os.urandom(size))
    with archive.transaction():
        archive.kv_keeping.record_use(FP, message.id)
    return conv.id


def test_kv_shows_the_budget_what_is_stored_and_who_holds_it(chatdb, db_path):
    with Archive.open(db_path) as archive:
        small, large = _stored_chat(archive, 2), _stored_chat(archive, 5)
    doc = chatdb("kv", "--json").json()
    assert doc["budget_source"] == "default" and doc["budget_bytes"] <= 4 << 30
    assert 7 * (64 << 10) <= doc["stored_bytes"] <= doc["file_bytes"]
    assert [(c["id"], c["tokens"]) for c in doc["conversations"]] == [(large, 35), (small, 14)]
    assert doc["conversations"][0]["kv_bytes"] > 5 * (64 << 10)
    assert doc["text_bytes"] > 0 and doc["rest_bytes"] > 0 and doc["reopened"]["turns"] == 0
    text = chatdb("kv").stdout
    for words in ("KV budget", "tenth of the disk", "KV stored", "the rest", "most KV",
                  "chat of 5", "no chat reopened yet"):
        assert words in text, words


def test_kv_budget_is_the_archives_and_a_bad_size_is_one_line_that_changes_nothing(chatdb):
    assert chatdb("kv", "budget", "500MB", "--json").json()["budget_bytes"] == 500 * 10**6
    over = chatdb("kv", "--json", env={"CHATDB_KV_BUDGET": "4GiB"}).json()
    assert (over["budget_bytes"], over["budget_source"]) == (4 << 30, "CHATDB_KV_BUDGET")
    assert "CHATDB_KV_BUDGET" in chatdb("kv", env={"CHATDB_KV_BUDGET": "big"}).error()
    assert "500MB, 4GiB, 0 or unlimited" in chatdb("kv", "budget", "two gigs").error()
    kept = chatdb("kv", "budget", "--json").json()
    assert (kept["budget_bytes"], kept["budget_source"]) == (500 * 10**6, "archive")


def test_delete_half_and_prune_and_the_file_is_about_half(chatdb, db_path):
    with Archive.open(db_path) as archive:
        chats = [_stored_chat(archive, 6) for _ in range(8)]
    full = chatdb("kv", "--json").json()
    deleted = chatdb("delete", chats[0])   # gives back the pages it freed at once
    assert deleted.returncode == 0
    with Archive.open(db_path) as archive:
        assert archive.conn.execute("PRAGMA freelist_count").fetchone()[0] == 0
        for conv in chats[2::2]:
            archive.delete_conversation(conv)   # leaves its pages free in the file
    pruned = chatdb("kv", "prune", "--json").json()
    after = chatdb("kv", "--json").json()
    assert after["stored_bytes"] == full["stored_bytes"] // 2
    assert after["free_bytes"] == 0 and after["wal_bytes"] == 0
    kv_before = full["file_bytes"] - full["rest_bytes"] - full["free_bytes"]
    assert after["file_bytes"] - after["rest_bytes"] <= 0.55 * kv_before
    assert pruned["file_after"] == after["file_bytes"] < pruned["file_before"]


def test_prune_applies_a_lower_budget_now(chatdb, db_path):
    with Archive.open(db_path) as archive:
        old, new = _stored_chat(archive, 4), _stored_chat(archive, 4)
        with archive.transaction():
            archive.kv_budget.set(300 << 10)
    text = chatdb("kv", "prune")
    assert text.returncode == 0 and "dropped" in text.stdout
    doc = chatdb("kv", "--json").json()
    assert doc["stored_bytes"] <= 300 << 10
    assert [c["id"] for c in doc["conversations"]] == [new]   # the older chat went first
    with Archive.open(db_path) as archive:
        with archive.transaction():
            archive.kv_budget.set(0)
    assert chatdb("kv", "prune", "--json").json()["stored_bytes"] == 0


def test_kv_type_is_the_archives_and_the_environment_overrides_it(chatdb, archive):
    assert chatdb("kv", "type", "--json").json() == {"kv_type": "f16", "source": "default"}
    assert chatdb("kv", "type", "q8_0", "--json").json() == {"kv_type": "q8_0", "source": "archive"}
    assert archive.settings.get("kv_type") == "q8_0"   # what every engine on the archive reads
    over = chatdb("kv", "type", "--json", env={"CHATDB_KV_TYPE": "f16"}).json()
    assert over == {"kv_type": "f16", "source": "$CHATDB_KV_TYPE"}
