"""Tags, pins and the archived flag in the archive: kept, matched, listed, searched, refused."""

import sqlite3

import pytest

from chatdb.search import filters, fulltext
from chatdb.search.hybrid import search
from chatdb.tags import MAX_TAG, TagError


def chat(archive, title, *texts):
    conv = archive.create_conversation(title)
    for i, text in enumerate(texts):
        archive.add_message(conv.id, "user" if i % 2 == 0 else "assistant", text)
    return conv.id


def test_tags_match_without_case_and_keep_their_first_spelling(archive):
    a = chat(archive, "a", "hello")
    assert archive.tags.add(a, ["Rust", "rust", " machine learning ", "Ünïcode"]) == \
        ["machine learning", "Rust", "Ünïcode"]
    b = chat(archive, "b", "hi")
    archive.tags.add(b, ["RUST"])
    assert archive.tags.of(b) == ["Rust"]                    # the first spelling
    assert archive.tags.counts() == [("Rust", 2), ("machine learning", 1), ("Ünïcode", 1)]
    assert archive.tags.remove(a, ["RUST", "never there"]) == ["machine learning", "Ünïcode"]


def test_a_tag_goes_with_the_last_conversation_carrying_it(archive):
    a, b = chat(archive, "a", "x"), chat(archive, "b", "y")
    archive.tags.add(a, ["shared", "only-a"])
    archive.tags.add(b, ["shared"])
    archive.delete_conversation(a)                           # the cascade takes its tags
    assert archive.tags.counts() == [("shared", 1)]
    archive.tags.remove(b, ["shared"])
    assert archive.conn.execute("SELECT count(*) FROM tags").fetchone()[0] == 0


@pytest.mark.parametrize("bad, said", [
    ("x" * 10_000, f"at most {MAX_TAG} characters"),
    ("two\nlines", "control character (U+000A"),
    ("bell\x07", "control character (U+0007"),
    ("half \ud800 a pair", "lone surrogate (U+D800"),
    ("   ", "cannot be empty"),
])
def test_what_cannot_be_a_tag_is_refused_in_one_line_and_changes_nothing(archive, bad, said):
    a = chat(archive, "a", "x")
    archive.tags.add(a, ["kept"])
    with pytest.raises(TagError) as refused:
        archive.tags.add(a, ["fine", bad])
    assert said in str(refused.value) and "\n" not in str(refused.value)
    assert archive.tags.of(a) == ["kept"]                    # not even "fine"
    with pytest.raises(TagError):
        archive.list_conversations(tags=[bad])


def test_list_puts_pins_first_and_leaves_archived_out_unless_asked(archive):
    old, middle, new = chat(archive, "old", "1"), chat(archive, "middle", "2"), chat(archive, "new", "3")
    archive.tags.set_flag(old, "pinned", True)
    archive.tags.set_flag(middle, "archived", True)
    assert [c.id for c in archive.list_conversations()] == [old, new]
    assert archive.list_conversations()[0].pinned
    assert [c.id for c in archive.list_conversations(archived=True)] == [middle]
    assert [c.id for c in archive.list_conversations(archived=None)] == [old, new, middle]
    assert [c.id for c in archive.list_conversations(pinned=True)] == [old]
    assert [c.id for c in archive.list_conversations(limit=1)] == [old]
    assert archive.conversation(old).updated_at < archive.conversation(new).updated_at  # a pin is no use
    with pytest.raises(sqlite3.IntegrityError):   # the flags are 0 or 1
        archive.conn.execute("UPDATE conversations SET pinned = 2 WHERE id = ?", (old,))


def test_list_by_tags_needs_every_tag(archive):
    both, one, none = chat(archive, "both", "x"), chat(archive, "one", "y"), chat(archive, "none", "z")
    archive.tags.add(both, ["work", "Rust"])
    archive.tags.add(one, ["work"])
    assert [c.id for c in archive.list_conversations(tags=["WORK"])] == [one, both]
    assert [c.id for c in archive.list_conversations(tags=["work", "rust"])] == [both]
    assert [c.id for c in archive.list_conversations(tags=["work", "work"])] == [one, both]
    assert archive.list_conversations(tags=["work", "absent"]) == []
    assert [c.id for c in archive.list_conversations(tags=["work"], limit=1)] == [one]  # in order
    assert [c.id for c in archive.list_conversations(tags=["rust", "work"], limit=1)] == [both]
    archive.tags.set_flag(both, "archived", True)
    assert [c.id for c in archive.list_conversations(tags=["work"])] == [one]
    assert archive.list_conversations(tags=["rust"], archived=True)[0].tags == ["Rust", "work"]


def test_a_fork_copies_the_tags_of_the_conversation_it_comes_from(archive):
    origin = chat(archive, "origin", "question", "answer")
    archive.tags.add(origin, ["kept"])
    fork = archive.fork(archive.messages(origin)[0].id)
    assert archive.tags.of(fork.id) == ["kept"]
    archive.tags.add(fork.id, ["fork only"])
    assert archive.tags.of(origin) == ["kept"]               # a copy, not a link
    assert not archive.tags.flags(fork.id)["pinned"]


@pytest.fixture(params=["listed", "checked per match"])
def strategy(request, monkeypatch):
    """A tag's messages listed (a small tag), or each match's writer checked (a large one)."""
    if request.param != "listed":
        monkeypatch.setattr(filters, "LISTED_AT_MOST", 0)
    return request.param


def test_search_by_tag_and_tag_terms_in_the_query(archive, strategy):
    rust = chat(archive, "rust", "the borrow checker again", "borrow rules")
    python = chat(archive, "python", "borrow a list in python")
    archive.tags.add(rust, ["Rust"])
    every = {h.conversation_id for h in fulltext.search(archive.conn, "borrow")}
    assert every == {rust, python}
    assert {h.conversation_id for h in fulltext.search(archive.conn, "borrow", tags=["rust"])} == {rust}
    assert {h.conversation_id for h in fulltext.search(archive.conn, "tag:RUST borrow")} == {rust}
    assert fulltext.search(archive.conn, 'borrow tag:"no such tag"') == []
    words = search(archive.conn, "borrow tag:rust", by="words")
    assert {h.conversation_id for h in words} == {rust}
    assert fulltext.search(archive.conn, "borrow", tags=["rust"], conversation_id=python) == []


def test_search_by_tag_reaches_a_forks_shared_start(archive, strategy):
    origin = chat(archive, "origin", "zebra question", "zebra answer")
    fork = archive.fork(archive.messages(origin)[-1].id)
    archive.tags.add(fork.id, ["forked"])
    hits = fulltext.search(archive.conn, "zebra", tags=["forked"])
    assert len(hits) == 2    # written by the origin, reached by the tagged fork
