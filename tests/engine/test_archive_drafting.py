"""Drafting from the archive with the real model: a retry guessed from its sibling, a repeat
from another conversation, exact greedy and seeded output, nothing drafted where nothing
matches, and a deleted conversation's answers gone from the guesses."""

import pytest

from engine.llama.sampling import SamplingSettings

pytestmark = pytest.mark.usefixtures("pinned_draft_costs")   # how much is drafted, not the load

QUESTION = "List ten fruits, one per line, each with its colour."
GREEDY = SamplingSettings(temperature=0, max_tokens=120, seed=1)


def _from_archive(result) -> int:
    return result.speculative["by_drafter"]["archive"]["accepted"]


def _tokens(archive, engine, result):
    return archive.tokens.get(result.message_id, engine.tokenizer).tolist()


def test_a_greedy_retry_is_guessed_from_its_sibling_and_equals_plain_decoding(open_engine):
    archive, engine = open_engine(draft="off")
    conv = archive.create_conversation("retry")
    first = engine.reply(conv.id, QUESTION, sampling=GREEDY)
    plain = engine.answer(conv.id, first.user_message_id, sampling=GREEDY)
    retry = engine.answer(conv.id, first.user_message_id, sampling=GREEDY, draft="archive")
    assert _tokens(archive, engine, retry) == _tokens(archive, engine, plain)
    assert retry.speculative["mode"] == "archive"
    assert _from_archive(retry) >= retry.completion_tokens // 2
    assert retry.speculative["target_forwards"] < retry.completion_tokens // 2


def test_a_seeded_sampled_retry_drafted_from_the_archive_is_the_undrafted_one(open_engine):
    archive, engine = open_engine(draft="off")
    conv = archive.create_conversation("sampled")
    warm = SamplingSettings(temperature=0.7, max_tokens=120, seed=1)
    first = engine.reply(conv.id, QUESTION, sampling=warm)
    again = warm.with_(seed=2)
    plain = engine.answer(conv.id, first.user_message_id, sampling=again)
    drafted = engine.answer(conv.id, first.user_message_id, sampling=again, draft="auto")
    assert _tokens(archive, engine, drafted) == _tokens(archive, engine, plain)
    assert drafted.speculative["mode"] == "archive+lookup" and _from_archive(drafted) > 0


def test_a_question_asked_again_in_a_new_conversation_is_guessed_from_the_archive(open_engine):
    archive, engine = open_engine(draft="off")
    first = engine.reply(archive.create_conversation("one").id, QUESTION, sampling=GREEDY)
    again = engine.reply(archive.create_conversation("two").id, QUESTION, sampling=GREEDY,
                         draft="archive")
    assert again.text == first.text
    assert _from_archive(again) >= again.completion_tokens // 2
    assert engine.describe()["speculative"]["archive_index"]["answers"] == 1


def test_nothing_is_drafted_from_the_archive_where_nothing_matches(open_engine):
    archive, engine = open_engine(draft="off")
    gone = archive.create_conversation("gone")
    engine.reply(gone.id, QUESTION, sampling=GREEDY)
    engine.reply(archive.create_conversation("other").id, "Write a haiku about snow.",
                 sampling=GREEDY, draft="archive")   # the index now holds the first answer
    archive.delete_conversation(gone.id)
    unrelated = engine.reply(archive.create_conversation("prose").id, QUESTION,
                             sampling=GREEDY, draft="archive")
    by = unrelated.speculative["by_drafter"]["archive"]
    assert by["drafted"] < unrelated.completion_tokens // 4   # the deleted answer is not guessed
    assert unrelated.speculative["target_forwards"] >= unrelated.completion_tokens - by["accepted"] - 1
    assert engine.describe()["speculative"]["archive_index"]["answers"] == 1
