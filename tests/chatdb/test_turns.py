"""Turns on one conversation at once: questions hang where they were read, heads move under a check."""

import threading

from chatdb.archive import Archive


def _answered(archive):
    conv = archive.create_conversation("c", system_prompt="Be brief.")
    archive.add_message(conv.id, "user", "Hi")
    answer = archive.add_message(conv.id, "assistant", "Hello")
    return conv.id, answer.id


def test_a_question_under_an_unanswered_one_becomes_its_sibling(archive):
    conv, answer = _answered(archive)
    first = archive.add_question(conv, "one")
    second = archive.add_question(conv, "two")
    assert first.parent_id == second.parent_id == answer
    assert archive.conversation(conv).head_id == second.id


def test_the_head_moves_only_from_where_the_turn_left_it(archive):
    conv, answer = _answered(archive)
    first = archive.add_question(conv, "one")
    second = archive.add_question(conv, "two")
    late = archive.add_message(conv, "assistant", "to one", parent_id=first.id, move_head=False)
    assert not archive.advance_head(conv, first.id, late.id)     # "two" moved it meanwhile
    assert archive.conversation(conv).head_id == second.id
    mine = archive.add_message(conv, "assistant", "to two", parent_id=second.id, move_head=False)
    assert archive.advance_head(conv, second.id, mine.id)
    assert archive.conversation(conv).head_id == mine.id


def test_retract_takes_a_question_back_and_the_head_with_it(archive):
    conv, answer = _answered(archive)
    question = archive.add_question(conv, "too long")
    assert archive.retract(question.id)
    assert archive.conversation(conv).head_id == answer
    assert [m.id for m in archive.children(answer)] == []
    assert not archive.retract(answer - 1)  # has a child: stays
    assert archive.message(answer - 1).content == "Hi"


def test_concurrent_questions_in_one_process_are_siblings(archive, db_path):
    conv, answer = _answered(archive)
    start, asked_all = threading.Barrier(8), threading.Barrier(8)
    asked = []

    def ask(i):
        with Archive.open(db_path) as own:
            start.wait()
            question = own.add_question(conv, f"q{i}")
            asked_all.wait()  # every answer is still being computed
            reply = own.add_message(conv, "assistant", f"a{i}", parent_id=question.id, move_head=False)
            own.advance_head(conv, question.id, reply.id)
            asked.append((question.id, reply.id))

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(asked) == 8
    assert sorted(m.id for m in archive.children(answer)) == sorted(q for q, _ in asked)
    for question, reply in asked:
        assert [m.id for m in archive.children(question)] == [reply]
    assert archive.conversation(conv).head_id in {q for q, _ in asked} | {r for _, r in asked}
