"""The archive drafter's index and drafter on a real archive file, with stored token arrays
(no model: the tokens are made up; what the index reads is only ever tokens)."""

import numpy as np
import pytest

from chatdb.archive import Archive
from engine.decode.archive_drafter import ArchiveDrafter
from engine.decode.vote import vote
from engine.decode.archive_index import N, ArchiveIndex, anchor_hash

TOK, OTHER = "tok-a", "tok-b"


def _answer(archive, conv, tokens, tokenizer=TOK, question="q"):
    q = archive.add_message(conv.id, "user", question)
    archive.tokens.put(q.id, tokenizer, [1, 2, 3, 4, 5, 6, 7, 8])   # questions are not indexed
    a = archive.add_message(conv.id, "assistant", "a")
    archive.tokens.put(a.id, tokenizer, tokens)
    return q, a


def _tokens(seed, n):
    return np.random.default_rng(seed).integers(100, 50_000, n).astype(np.int32)


def test_a_run_of_tokens_is_found_where_it_was_written(archive):
    conv = archive.create_conversation("c")
    first = _tokens(1, 300)
    _, a = _answer(archive, conv, first)
    _answer(archive, conv, _tokens(2, 300), tokenizer=OTHER)   # another tokenizer's: not indexed
    index = ArchiveIndex(TOK)
    assert index.refresh(archive.token_sources) == 1
    assert index.total == 300 and index.anchors == 300 - N
    found = index.lookup(anchor_hash(first[100:100 + N]))
    assert found == [(a.id, 100 + N)]
    assert index.lookup(anchor_hash([9, 9, 9, 9, 9])) == []


def test_the_index_grows_by_what_is_new_and_drops_what_is_deleted(archive):
    index = ArchiveIndex(TOK)
    conv = archive.create_conversation("c")
    kept = _tokens(3, 200)
    _, a = _answer(archive, conv, kept)
    index.refresh(archive.token_sources)
    doomed = archive.create_conversation("d")
    gone = _tokens(4, 200)
    _answer(archive, doomed, gone)
    assert index.refresh(archive.token_sources) == 1   # only the new one is read
    assert index.lookup(anchor_hash(gone[50:50 + N]))
    archive.delete_conversation(doomed.id)
    assert index.refresh(archive.token_sources) == 0
    assert index.lookup(anchor_hash(gone[50:50 + N])) == []
    assert index.lookup(anchor_hash(kept[50:50 + N])) == [(a.id, 50 + N)]
    assert index.anchors == 200 - N


def test_a_budget_keeps_a_share_of_the_anchors_and_a_repeat_is_still_found(archive):
    conv = archive.create_conversation("c")
    arrays = [_tokens(10 + i, 2_000) for i in range(20)]
    for tokens in arrays:
        _answer(archive, conv, tokens)
    index = ArchiveIndex(TOK, budget_bytes=100_000)
    index.refresh(archive.token_sources)
    assert index.nbytes <= 100_000 and index.shift >= 2
    # Within a few tokens of any point of a stored answer, some position is an anchor.
    tokens = arrays[7]
    hits = [i for i in range(1000, 1100) if index.kept(anchor_hash(tokens[i - N:i]))]
    assert hits and hits[0] < 1000 + 8 * 2 ** index.shift
    assert any(offset == hits[0] for _, offset in index.lookup(anchor_hash(tokens[hits[0] - N:hits[0]])))


def test_the_index_is_saved_and_read_back(archive, tmp_path):
    conv = archive.create_conversation("c")
    tokens = _tokens(5, 500)
    _, a = _answer(archive, conv, tokens)
    index = ArchiveIndex(TOK)
    index.refresh(archive.token_sources)
    path = ArchiveIndex.file_for(archive.db_path, TOK)
    index.save(path)
    assert path.stat().st_mode & 0o077 == 0
    again = ArchiveIndex(TOK)
    assert again.load(path) and again.refresh(archive.token_sources) == 0
    assert again.lookup(anchor_hash(tokens[10:10 + N])) == [(a.id, 10 + N)]
    assert not ArchiveIndex(OTHER).load(path)   # another tokenizer's file is not this index


def test_a_deleted_newest_answer_whose_id_comes_back_is_indexed(archive):
    conv = archive.create_conversation("c")
    _answer(archive, conv, _tokens(6, 100))
    index = ArchiveIndex(TOK)
    index.refresh(archive.token_sources)
    doomed = archive.create_conversation("d")
    _, a = _answer(archive, doomed, _tokens(7, 100))
    index.refresh(archive.token_sources)
    archive.delete_conversation(doomed.id)
    fresh = _tokens(8, 100)
    _, b = _answer(archive, conv, fresh)
    index.refresh(archive.token_sources)
    assert index.lookup(anchor_hash(fresh[20:20 + N])) == [(b.id, 20 + N)]


def _guess(drafter, context, k):
    drafter.kind(context)   # as a DraftRun asks, before each guess
    return drafter.propose(context, k)


def test_the_vote_follows_what_most_candidates_share():
    assert vote([[1, 2, 3], [1, 2, 4], [1, 5]], 3) == ([1, 2, 3], [0])
    assert vote([[7, 8], [9, 8], [9, 8]], 2) == ([9, 8], [1, 2])


def test_the_drafter_guesses_a_retry_from_its_sibling_and_a_repeat_from_the_archive(archive):
    conv = archive.create_conversation("c")
    earlier = _tokens(20, 400)
    _answer(archive, archive.create_conversation("old"), earlier)
    q, sibling = _answer(archive, conv, _tokens(21, 400))
    index = ArchiveIndex(TOK)
    index.refresh(archive.token_sources)
    related = archive.token_sources.related(q.id, conv.id, TOK, 16, 1 << 15)
    assert [(mid, tier) for mid, _, tier in related] == [(sibling.id, 0)]
    retry = ArchiveDrafter(related, index, archive.token_sources, TOK)
    stored = archive.tokens.get(sibling.id, TOK).tolist()
    assert retry.kind([1, 2, 3]) == "start"
    assert retry.propose([1, 2, 3], 8) == stored[:8]   # an answer to the same question: its start
    assert retry.kind([1, 2, 3] + stored[:4]) == "follow"
    assert _guess(retry, [1, 2, 3] + stored[:4] + [7], 8) == []   # left behind
    assert _guess(retry, [1, 2, 3] + stored[:4] + [7] + stored[20:24], 8) == stored[24:32]
    repeat = ArchiveDrafter([], index, archive.token_sources, TOK)
    context = [1, 2] + earlier[:50].tolist()
    assert _guess(repeat, context, 10) == earlier[50:60].tolist()
    # It follows without looking up again, across the stored answer's windows.
    context += earlier[50:300].tolist()
    assert _guess(repeat, context, 10) == earlier[300:310].tolist()
    assert repeat.found == {"related": 0, "archive": 1}
    assert _guess(ArchiveDrafter([], index, archive.token_sources, TOK), [5, 5, 5, 5, 5, 5], 4) == []


@pytest.fixture
def archive(db_path):
    with Archive.open(db_path) as archive:
        yield archive


def test_an_edited_first_message_is_related_to_the_first_answer_of_its_conversation(archive):
    conv = archive.create_conversation("c")
    q, a = _answer(archive, conv, _tokens(30, 50))
    edited = archive.add_message(conv.id, "user", "q again", parent_id=None)
    _answer(archive, archive.create_conversation("other"), _tokens(31, 50))   # another tree
    related = archive.token_sources.related(edited.id, conv.id, TOK, 16, 1 << 15)
    assert [(mid, tier) for mid, _, tier in related] == [(a.id, 1)]


def test_a_large_first_build_runs_aside_and_joins_when_done(archive, monkeypatch):
    from engine.decode import archive_drafts

    conv = archive.create_conversation("c")
    tokens = _tokens(40, 300)
    _, a = _answer(archive, conv, tokens)
    _answer(archive, conv, _tokens(41, 300))
    monkeypatch.setattr(archive_drafts, "AT_ONCE", 1)
    drafts = archive_drafts.ArchiveDrafts(archive, TOK)
    assert drafts.current() is None and drafts.describe()["building"]
    drafts.wait()
    index = drafts.current()
    assert index.lookup(anchor_hash(tokens[30:30 + N])) == [(a.id, 30 + N)]
    assert drafts.describe()["from"] == "built aside"
    assert ArchiveIndex.file_for(archive.db_path, TOK).is_file()   # the next engine reads it
    again = archive_drafts.ArchiveDrafts(archive, TOK)
    assert again.current() is not None and again.describe()["from"] == "file"


def test_an_answer_of_a_million_tokens_is_indexed_and_read_a_window_at_a_time(archive):
    conv = archive.create_conversation("long")
    tokens = _tokens(50, 1_000_000)
    _, a = _answer(archive, conv, tokens)
    index = ArchiveIndex(TOK, budget_bytes=4 << 20)
    index.refresh(archive.token_sources)
    assert index.nbytes <= 4 << 20 and index.total == 1_000_000
    drafter = ArchiveDrafter([], index, archive.token_sources, TOK)
    context = tokens[900_000:900_100].tolist()
    hits = [i for i in range(N, 100) if index.kept(anchor_hash(context[i - N:i]))]
    assert hits   # a kept anchor within the first hundred tokens
    # As an answer is written, a token at a time: the first kept anchor finds the source.
    guesses = [(i, _guess(drafter, context[:i], 8)) for i in range(N, 100)]
    first, guess = next((i, g) for i, g in guesses if g)
    assert first == hits[0] and guess == tokens[900_000 + first:900_008 + first].tolist()
