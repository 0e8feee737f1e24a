"""Prompt lookup's guesses (no model): the longest recent n-gram found, and of its latest
occurrences the continuation most of them share, the latest where none is more frequent."""

from engine.decode.lookup import PER_KEY, LookupDrafter


def test_the_latest_occurrence_wins_where_each_continuation_is_written_once():
    drafter = LookupDrafter([1, 2, 3, 9, 1, 2, 4, 5, 8])
    assert drafter.propose([1, 2, 3, 9, 1, 2, 4, 5, 8, 1, 2], 2) == [4, 5]


def test_a_continuation_written_more_often_wins_over_the_latest():
    drafter = LookupDrafter([1, 2, 3, 6, 1, 2, 3, 6, 1, 2, 4, 5])
    assert drafter.propose(drafter.tokens + [1, 2], 2) == [3, 6]


def test_the_guess_follows_the_majority_token_by_token():
    # after (1, 2): 3 twice, then 7 or 8 once each after the 3s; the latest of the tie wins
    drafter = LookupDrafter([1, 2, 3, 7, 0, 1, 2, 3, 8, 0, 1, 2, 5])
    assert drafter.propose(drafter.tokens + [1, 2], 2) == [3, 8]


def test_a_longer_ngram_wins_over_a_frequent_shorter_one():
    drafter = LookupDrafter([7, 1, 2, 5, 0, 1, 2, 3, 0, 1, 2, 3, 0, 7, 1, 2])
    assert drafter.draft(1) == [5]


def test_only_the_latest_occurrences_vote():
    old = [1, 2, 3, 0] * 20
    recent = [1, 2, 4, 0] * PER_KEY
    drafter = LookupDrafter(old + recent + [1, 2])
    assert drafter.draft(1) == [4]
    assert all(len(found) <= PER_KEY for found in drafter.index.values())


def test_nothing_is_guessed_where_the_ngram_never_occurred():
    drafter = LookupDrafter([1, 2, 3, 4, 5])
    assert drafter.draft(4) == []
    assert drafter.propose([1, 2, 3, 4, 5, 1, 2], 3) == [3, 4, 5]
