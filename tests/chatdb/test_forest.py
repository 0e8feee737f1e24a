"""The data model: a forest of messages, conversations as pointers into it;
forks, edits, regeneration; deleting conversations and collecting what no
conversation reaches any more."""

import random
import sqlite3

import pytest

from chatdb.errors import ChatdbError, NotFound

FP = "model-a/kv-f16"
TOK = "smollm2/chatml"


def counts(conn) -> dict:
    return {table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("conversations", "messages", "message_tokens", "kv_segments",
                          "messages_fts")}


def ids(messages) -> list:
    return [m.id for m in messages]


def add(archive, conv_id, role, content, **kw):
    """add_message, with tokens and KV stored for the new message as the engine would."""
    message = archive.add_message(conv_id, role, content, **kw)
    archive.tokens.put(message.id, TOK, [message.id, 7, 8])
    archive.kv.put(message.id, FP, "rows", 3, bytes([message.id % 256]) * 96)
    return message


def children(archive, conv_id, parent_id) -> list:
    """The replies to `parent_id` the conversation reaches, oldest first."""
    return [m for m in archive.tree(conv_id) if m.parent_id == parent_id]


def chat(archive, title, turns, system="You are terse.", model=None):
    """A conversation with a system root and `turns` user/assistant pairs."""
    conv = archive.create_conversation(title, system_prompt=system, model=model)
    root = archive.messages(conv.id)[0]
    archive.tokens.put(root.id, TOK, [1, 2])
    archive.kv.put(root.id, FP, "rows", 2, b"\x00" * 64)
    out = [root]
    for n in range(turns):
        out.append(add(archive, conv.id, "user", f"{title} question {n}"))
        out.append(add(archive, conv.id, "assistant", f"{title} answer {n}"))
    return archive.conversation(conv.id), out


def fts_ids(conn) -> set:
    return {r[0] for r in conn.execute("SELECT rowid FROM messages_fts")}


def all_ids(conn) -> set:
    return {r[0] for r in conn.execute("SELECT id FROM messages")}


def assert_consistent(archive, assert_sound):
    """Every message is reached by some conversation; every side row has its message."""
    conn = archive.conn
    assert_sound(conn)
    reached = set()
    for summary in archive.list_conversations():
        reached |= set(ids(archive.tree(summary.id)))
    assert all_ids(conn) == reached
    assert fts_ids(conn) == reached
    for table in ("message_tokens", "kv_segments"):
        assert {r[0] for r in conn.execute(f"SELECT message_id FROM {table}")} <= reached


# -- the forest -------------------------------------------------------------------


def test_system_prompt_is_the_root_and_depth_counts_from_it(archive):
    conv = archive.create_conversation("c", system_prompt="Be brief.", model="smol")
    assert conv.system_prompt == "Be brief." and conv.model == "smol"
    root = archive.message(conv.head_id)
    assert (root.role, root.content, root.parent_id, root.depth) == ("system", "Be brief.", None, 0)
    assert root.conversation_id == conv.id
    q = archive.add_message(conv.id, "user", "hi")
    a = archive.add_message(conv.id, "assistant", "hello", meta={"tokens_per_s": 90.5})
    assert (q.parent_id, q.depth, a.parent_id, a.depth) == (root.id, 1, q.id, 2)
    assert a.meta == {"tokens_per_s": 90.5} and a.status == "complete"
    assert archive.conversation(conv.id).head_id == a.id
    assert [(m.role, m.content) for m in archive.messages(conv.id)] == [
        ("system", "Be brief."), ("user", "hi"), ("assistant", "hello")]
    assert archive.path(q.id) == archive.messages(conv.id)[:2]
    # The system prompt is not counted: the two messages the console numbers.
    assert archive.list_conversations()[0].message_count == 2


def test_without_a_system_prompt_the_first_message_is_the_root(archive):
    conv = archive.create_conversation("plain")
    assert conv.head_id is None and archive.messages(conv.id) == []
    assert archive.list_conversations()[0].message_count == 0
    first = archive.add_message(conv.id, "user", "hi")
    assert (first.parent_id, first.depth) == (None, 0)
    assert archive.conversation(conv.id).system_prompt is None
    assert archive.list_conversations()[0].message_count == 1
    other = archive.create_conversation("other")
    second_root = archive.add_message(other.id, "user", "separate tree")
    assert second_root.parent_id is None
    assert archive.path(second_root.id) == [second_root]
    assert archive.tree(conv.id) == [first]


def test_deep_path_comes_back_root_to_head(archive):
    conv, msgs = chat(archive, "long", 150)
    path = archive.messages(conv.id)
    assert ids(path) == ids(msgs)
    assert [m.depth for m in path] == list(range(301))


def test_fork_shares_ancestors_and_copies_nothing(archive):
    conv, (s, u1, a1, u2, a2) = chat(archive, "orig", 2)
    before = counts(archive.conn)
    fork = archive.fork(a1.id)
    assert counts(archive.conn) == {**before, "conversations": before["conversations"] + 1}
    assert fork.head_id == a1.id and fork.title == "orig (fork)"
    assert fork.system_prompt == "You are terse." and fork.meta == {"forked_from": a1.id}
    assert ids(archive.messages(fork.id)) == [s.id, u1.id, a1.id]

    u3 = archive.add_message(fork.id, "user", "fork question")
    assert (u3.parent_id, u3.depth, u3.conversation_id) == (a1.id, 3, fork.id)
    assert ids(archive.messages(fork.id)) == [s.id, u1.id, a1.id, u3.id]
    assert ids(archive.messages(conv.id)) == [s.id, u1.id, a1.id, u2.id, a2.id]
    assert ids(children(archive, conv.id, a1.id) + children(archive, fork.id, a1.id)) == [
        u2.id, u3.id]
    assert archive.count_messages() == before["messages"] + 1
    # Shared, not copied: one row per message, whichever conversation shows it.
    assert archive.conn.execute("SELECT count(DISTINCT content) FROM messages").fetchone()[0] == 6
    assert archive.fork(u3.id, title="named").title == "named"


def test_editing_an_earlier_message_makes_a_sibling_branch(archive):
    conv, (s, u1, a1, u2, a2) = chat(archive, "c", 2)
    edited = archive.add_message(conv.id, "user", "question 1, reworded", parent_id=u2.parent_id)
    assert (edited.parent_id, edited.depth) == (a1.id, u2.depth)
    assert archive.conversation(conv.id).head_id == edited.id
    assert ids(archive.messages(conv.id)) == [s.id, u1.id, a1.id, edited.id]
    assert ids(children(archive, conv.id, a1.id)) == [u2.id, edited.id]
    # The old branch is still the conversation's.
    assert set(ids(archive.tree(conv.id))) == {s.id, u1.id, a1.id, u2.id, a2.id, edited.id}
    # Editing the very first user message: a sibling under the system root.
    first = archive.add_message(conv.id, "user", "start over", parent_id=u1.parent_id)
    assert first.parent_id == s.id and first.depth == 1
    assert ids(archive.messages(conv.id)) == [s.id, first.id]


def test_regenerate_is_a_sibling_assistant_message(archive):
    conv, (s, u1, a1) = chat(archive, "c", 1)
    again = archive.add_message(conv.id, "assistant", "a better answer", parent_id=a1.parent_id)
    assert again.parent_id == u1.id and again.role == "assistant"
    assert [m.content for m in children(archive, conv.id, u1.id)] == ["c answer 0", "a better answer"]
    assert archive.messages(conv.id)[-1] == again
    # Back to the first answer: the head is a pointer.
    archive.set_head(conv.id, a1.id)
    assert archive.messages(conv.id)[-1] == a1


def test_move_head_false_leaves_the_head(archive):
    conv, msgs = chat(archive, "c", 1)
    draft = archive.add_message(conv.id, "user", "draft", move_head=False)
    assert draft.parent_id == msgs[-1].id
    assert archive.conversation(conv.id).head_id == msgs[-1].id


def test_interrupted_status_is_kept(archive):
    conv = archive.create_conversation("c")
    m = archive.add_message(conv.id, "assistant", "half an ans", status="interrupted")
    assert archive.message(m.id).status == "interrupted"
    with pytest.raises(sqlite3.IntegrityError):
        archive.conn.execute("UPDATE messages SET status = 'bogus' WHERE id = ?", (m.id,))


def test_bad_input_is_refused(archive):
    conv = archive.create_conversation("c")
    with pytest.raises(ChatdbError, match="role"):
        archive.add_message(conv.id, "robot", "x")
    with pytest.raises(ChatdbError, match="status"):
        archive.add_message(conv.id, "user", "x", status="done")
    with pytest.raises(NotFound):
        archive.add_message(conv.id + 100, "user", "x")
    with pytest.raises(NotFound):
        archive.add_message(conv.id, "user", "x", parent_id=12345)
    with pytest.raises(NotFound):
        archive.fork(12345)
    with pytest.raises(NotFound):
        archive.set_head(conv.id, 12345)
    assert archive.count_messages() == 0


# -- deleting and collecting ------------------------------------------------------


def test_delete_removes_exactly_the_unshared_messages_with_their_rows(archive, assert_sound):
    conv, msgs = chat(archive, "gone", 2)
    keep, kept = chat(archive, "kept", 1)
    before = counts(archive.conn)
    assert archive.delete_conversation(conv.id) == 5
    assert counts(archive.conn) == {
        "conversations": before["conversations"] - 1, "messages": before["messages"] - 5,
        "message_tokens": before["message_tokens"] - 5, "kv_segments": before["kv_segments"] - 5,
        "messages_fts": before["messages_fts"] - 5}
    assert all_ids(archive.conn) == set(ids(kept))
    assert ids(archive.messages(keep.id)) == ids(kept)
    with pytest.raises(NotFound):
        archive.conversation(conv.id)
    with pytest.raises(NotFound):
        archive.delete_conversation(conv.id)
    assert_consistent(archive, assert_sound)


def test_deleting_the_original_keeps_what_a_continued_fork_shares(archive, assert_sound):
    conv, (s, u1, a1, u2, a2) = chat(archive, "orig", 2)
    fork = archive.fork(a1.id)
    u3 = add(archive, fork.id, "user", "fork question")
    a3 = add(archive, fork.id, "assistant", "fork answer")

    assert archive.delete_conversation(conv.id) == 2  # u2, a2
    assert all_ids(archive.conn) == {s.id, u1.id, a1.id, u3.id, a3.id}
    assert ids(archive.messages(fork.id)) == [s.id, u1.id, a1.id, u3.id, a3.id]
    assert [archive.message(m.id).conversation_id for m in (s, u1, a1)] == [None] * 3
    assert archive.tokens.get(a1.id, TOK).tolist() == [a1.id, 7, 8]
    assert archive.kv.get(u2.id, FP) is None and archive.tokens.get(u2.id, TOK) is None
    assert [seg.message_id for seg in archive.kv.rows_along_path(a3.id, FP)] == [
        s.id, u1.id, a1.id, u3.id, a3.id]
    assert_consistent(archive, assert_sound)

    assert archive.delete_conversation(fork.id) == 5
    assert counts(archive.conn) == dict.fromkeys(counts(archive.conn), 0)
    assert_sound(archive.conn)


def test_a_fork_that_has_not_continued_keeps_the_whole_path(archive, assert_sound):
    conv, msgs = chat(archive, "orig", 2)
    fork = archive.fork(msgs[-1].id)
    assert archive.delete_conversation(conv.id) == 0
    assert ids(archive.messages(fork.id)) == ids(msgs)
    assert_consistent(archive, assert_sound)
    assert archive.delete_conversation(fork.id) == 5
    assert archive.count_messages() == 0


def test_old_branches_of_a_surviving_conversation_are_kept(archive, assert_sound):
    conv, (s, u1, a1, u2, a2) = chat(archive, "main", 2)
    edited = add(archive, conv.id, "user", "edited", parent_id=a1.id)
    regen1 = add(archive, conv.id, "assistant", "answer to edit", parent_id=edited.id)
    regen2 = add(archive, conv.id, "assistant", "another answer", parent_id=edited.id)
    archive.set_head(conv.id, regen1.id)  # current path: s u1 a1 edited regen1
    fork = archive.fork(u1.id)
    f1 = add(archive, fork.id, "assistant", "fork's answer")
    other_fork = archive.fork(u2.id)  # into an old branch: also kept by it

    assert archive.delete_conversation(fork.id) == 1
    assert f1.id not in all_ids(archive.conn)
    assert set(ids(archive.tree(conv.id))) == {
        s.id, u1.id, a1.id, u2.id, a2.id, edited.id, regen1.id, regen2.id}
    assert_consistent(archive, assert_sound)

    # Deleting the owner: only the fork's path into the old branch stays.
    assert archive.delete_conversation(conv.id) == 4  # a2, edited, regen1, regen2
    assert all_ids(archive.conn) == {s.id, u1.id, a1.id, u2.id}
    assert_consistent(archive, assert_sound)
    assert archive.delete_conversation(other_fork.id) == 4
    assert counts(archive.conn) == dict.fromkeys(counts(archive.conn), 0)


def test_fork_of_a_fork(archive, assert_sound):
    conv, (s, u1, a1, u2, a2) = chat(archive, "orig", 2)
    f1 = archive.fork(a2.id)
    u3 = add(archive, f1.id, "user", "f1 question")
    a3 = add(archive, f1.id, "assistant", "f1 answer")
    f2 = archive.fork(u3.id)
    assert archive.conversation(f2.id).meta == {"forked_from": u3.id}
    assert archive.conversation(f2.id).system_prompt == "You are terse."
    a4 = add(archive, f2.id, "assistant", "f2 answer")
    assert ids(archive.messages(f2.id)) == [s.id, u1.id, a1.id, u2.id, a2.id, u3.id, a4.id]

    assert archive.delete_conversation(f1.id) == 1  # a3; u3 is on f2's path
    assert archive.message(u3.id).conversation_id is None
    assert ids(archive.messages(f2.id)) == [s.id, u1.id, a1.id, u2.id, a2.id, u3.id, a4.id]
    assert_consistent(archive, assert_sound)
    assert archive.delete_conversation(conv.id) == 0
    assert_consistent(archive, assert_sound)
    assert archive.delete_conversation(f2.id) == 7
    assert counts(archive.conn) == dict.fromkeys(counts(archive.conn), 0)


def test_messages_left_behind_when_a_fork_moves_its_head_are_collected(archive, assert_sound):
    """The original is deleted while a fork still reaches its messages; the fork
    then regenerates the fork point, so the old answer is reached by no one."""
    conv, (s, u1, a1) = chat(archive, "orig", 1)
    fork = archive.fork(a1.id)
    bystander, others = chat(archive, "bystander", 1)
    assert archive.delete_conversation(conv.id) == 0
    again = add(archive, fork.id, "assistant", "regenerated", parent_id=u1.id)
    assert ids(archive.messages(fork.id)) == [s.id, u1.id, again.id]

    assert archive.delete_conversation(bystander.id) == 3 + 1  # its own, and a1
    assert all_ids(archive.conn) == {s.id, u1.id, again.id}
    assert_consistent(archive, assert_sound)
    assert archive.delete_conversation(fork.id) == 3
    assert counts(archive.conn) == dict.fromkeys(counts(archive.conn), 0)


def test_delete_is_one_transaction(archive, db_path):
    conv, msgs = chat(archive, "c", 3)
    fork = archive.fork(msgs[2].id)
    add(archive, fork.id, "user", "x")
    before = counts(archive.conn)
    tree_before = archive.tree(conv.id)
    # Fail on the last message SQLite would delete: everything before it is undone.
    archive.conn.execute(
        f"CREATE TEMP TRIGGER refuse BEFORE DELETE ON messages WHEN old.id = {msgs[-1].id} "
        "BEGIN SELECT RAISE(ABORT, 'refused by test'); END")
    with pytest.raises(sqlite3.IntegrityError, match="refused by test"):
        archive.delete_conversation(conv.id)
    assert not archive.conn.in_transaction
    assert counts(archive.conn) == before
    assert archive.tree(conv.id) == tree_before
    with sqlite3.connect(db_path) as other:
        assert other.execute("SELECT count(*) FROM messages").fetchone()[0] == before["messages"]
    other.close()
    archive.conn.execute("DROP TRIGGER refuse")
    assert archive.delete_conversation(conv.id) == 4


@pytest.mark.parametrize("seed", [1, 2, 4])
def test_random_histories_never_lose_or_leak_messages(archive, assert_sound, seed):
    """Random chats, edits, regenerations, forks and head moves; then delete the
    conversations in random order. After each delete the messages left are
    exactly those some remaining conversation reaches, and no remaining
    conversation lost any."""
    rng = random.Random(seed)
    convs = [chat(archive, f"c{n}", 1)[0].id for n in range(3)]
    for step in range(260):
        conv_id = rng.choice(convs)
        tree = archive.tree(conv_id)
        op = rng.random()
        if op < 0.45 or not tree:
            add(archive, conv_id, rng.choice(["user", "assistant"]), f"step {step}")
        elif op < 0.65:  # edit or regenerate: a sibling of a message on the path
            path = archive.messages(conv_id)
            target = rng.choice(path[1:] or path)
            add(archive, conv_id, target.role, f"redo {step}", parent_id=target.parent_id)
        elif op < 0.8:
            convs.append(archive.fork(rng.choice(tree).id).id)
        elif op < 0.9:  # move the head elsewhere in its own tree (or its path)
            archive.set_head(conv_id, rng.choice(tree).id)
        else:
            gone = rng.choice(convs)
            convs.remove(gone)
            _delete_and_check(archive, gone, convs, assert_sound)
            if not convs:
                convs.append(chat(archive, f"fresh{step}", 1)[0].id)
    rng.shuffle(convs)
    while convs:
        _delete_and_check(archive, convs.pop(), convs, assert_sound)
    assert counts(archive.conn) == dict.fromkeys(counts(archive.conn), 0)


def _delete_and_check(archive, gone, remaining, assert_sound):
    trees = {c: ids(archive.tree(c)) for c in remaining}
    before = archive.count_messages()
    removed = archive.delete_conversation(gone)
    assert archive.count_messages() == before - removed
    for c in remaining:
        assert ids(archive.tree(c)) == trees[c]
    assert_consistent(archive, assert_sound)
    return removed


def test_forking_a_message_whose_conversation_is_gone(archive):
    conv, (s, u1, a1) = chat(archive, "orig", 1, model="smol")
    keeper = archive.fork(a1.id)
    assert (keeper.title, keeper.model) == ("orig (fork)", "smol")
    archive.delete_conversation(conv.id)
    again = archive.fork(u1.id)
    assert (again.title, again.model, again.system_prompt) == ("fork", None, "You are terse.")
    assert ids(archive.messages(again.id)) == [s.id, u1.id]
    untitled = archive.create_conversation("")
    first = archive.add_message(untitled.id, "user", "no system prompt")
    plain = archive.fork(first.id)
    assert (plain.title, plain.system_prompt) == ("fork", None)
