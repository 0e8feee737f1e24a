"""Vectors in the archive and the search that fuses words and meaning, on real archive files."""

import pytest

from chatdb.errors import SearchError
from chatdb.search import fulltext
from chatdb.search.hybrid import Meaning, search
from chatdb.search.index_upkeep import MOST_SEGMENTS, segments
from chatdb.search.vectors import VectorStore
from engine.embed.background import BackgroundIndexer
from engine.embed.embedder import Embedder
from engine.embed.indexer import Indexer

from ..fts_segments import written_apart

CHATS = {
    "uploads": [("user", "My uploads to S3 keep dying halfway on the train wifi."),
                ("assistant", "Retry each multipart PUT on timeout with exponential backoff, "
                              "and resume from the parts already sent.")],
    "baking": [("user", "What is a good recipe for banana bread?"),
               ("assistant", "Mash three ripe bananas with butter, sugar, an egg and flour; "
                             "bake for an hour at 175 degrees.")],
    "rust": [("user", "Explain the borrow checker in Rust."),
             ("assistant", "References must never outlive the value they borrow; the compiler "
                           "checks every borrow against the owner's lifetime.")],
    "trip": [("user", "Plan three days in Kyoto in spring."),
             ("assistant", "Temples in the morning, the Philosopher's Path under cherry "
                           "blossoms, and Nishiki market for lunch.")],
}


def fill(archive) -> dict[str, int]:
    ids = {}
    for title, turns in CHATS.items():
        conv = archive.create_conversation(title)
        ids[title] = conv.id
        for role, text in turns:
            archive.add_message(conv.id, role, text)
    return ids


def ids_of(hits):
    return [h.message_id for h in hits]


@pytest.fixture
def indexed(archive, embedder):
    convs = fill(archive)
    Indexer(archive, embedder).run()
    return archive, convs, Meaning(VectorStore(archive.conn).model_id(embedder.fingerprint), None)


def by_meaning(archive, embedder, model_id, query, **kw):
    return search(archive.conn, query, by=kw.pop("by", "meaning"),
                  meaning=Meaning(model_id, embedder.embed_query(query)), **kw)


def test_meaning_finds_a_message_that_shares_no_word_with_the_query(indexed, embedder):
    archive, convs, m = indexed
    query = "fixing unreliable transfers to cloud storage"
    assert fulltext.search(archive.conn, query) == []
    hits = by_meaning(archive, embedder, m.model_id, query, by="both", limit=3)
    top = archive.message(hits[0].message_id)
    assert top.conversation_id == convs["uploads"]
    assert hits[0].words_rank is None and hits[0].meaning_rank == 1
    assert hits[0].similarity > 0.2 and hits[0].fused is not None
    assert hits[0].snippet == top.content[:len(hits[0].snippet)]  # no marks: not matched by words


def test_by_words_is_the_full_text_search_hit_for_hit(indexed, embedder):
    archive, convs, m = indexed
    for query, kw in [("borrow", {}), ("the", {"role": "assistant"}), ("bananas OR temples", {}),
                      ("kyoto", {"conversation_id": convs["trip"]}), ("C++ (", {}),
                      ("the", {"since": "2000-01-01", "until": "2999-01-01", "limit": 2})]:
        words = search(archive.conn, query, by="words", **kw)
        today = fulltext.search(archive.conn, query, **kw)
        assert [(h.message_id, h.snippet, h.score) for h in words] == \
               [(h.message_id, h.snippet, h.score) for h in today]
        assert [h.words_rank for h in words] == list(range(1, len(today) + 1))


def test_both_keeps_word_matches_and_their_marks(indexed, embedder):
    archive, convs, m = indexed
    hits = by_meaning(archive, embedder, m.model_id, "borrow checker", by="both", limit=5)
    assert archive.message(hits[0].message_id).conversation_id == convs["rust"]
    assert hits[0].words_rank == 1 and hits[0].meaning_rank is not None
    assert fulltext.MARK_START in hits[0].snippet


def test_filters_apply_to_meaning_too(indexed, embedder):
    archive, convs, m = indexed
    query = "sweet things from the oven"
    hits = by_meaning(archive, embedder, m.model_id, query, role="user")
    assert hits and all(h.role == "user" for h in hits)
    hits = by_meaning(archive, embedder, m.model_id, query, conversation_id=convs["trip"])
    assert {archive.message(h.message_id).conversation_id for h in hits} <= {convs["trip"]}
    assert by_meaning(archive, embedder, m.model_id, query, until="2001-01-01") == []


def test_bad_queries_as_by_words(indexed, embedder):
    archive, _, m = indexed
    meaning = Meaning(m.model_id, embedder.embed_query("x"))
    assert search(archive.conn, "   ", by="both", meaning=meaning) == []
    page = " ".join(f"w{i}" for i in range(300))
    for by in ("words", "meaning", "both"):
        with pytest.raises(SearchError, match="at most 256"):
            search(archive.conn, page, by=by, meaning=meaning)
    with pytest.raises(SearchError, match="since .* is not before until"):
        search(archive.conn, "x", by="both", meaning=meaning, since="2024-02-01", until="2024-01-01")
    with pytest.raises(SearchError, match="embedding model"):
        search(archive.conn, "x", by="meaning")


def test_the_background_indexer_merges_a_text_index_in_many_segments(archive, embedder, db_path):
    conv_id = written_apart(archive, [f"note {i} on gardening" for i in range(MOST_SEGMENTS + 4)])
    assert segments(archive.conn) > MOST_SEGMENTS
    indexer = BackgroundIndexer(db_path, embedder.model.path, poll=60)
    try:
        archive.add_message(conv_id, "assistant", "Water them in the morning.")
        assert indexer.flush(timeout=120)
    finally:
        indexer.close()
    assert segments(archive.conn) == 1
    assert len(fulltext.search(archive.conn, "gardening", limit=50)) == MOST_SEGMENTS + 4


def test_vectors_are_written_with_messages_and_removed_with_them(archive, embedder, db_path):
    fill(archive)  # the backlog: left to `chatdb index`
    indexer = BackgroundIndexer(db_path, embedder.model.path, poll=60)
    try:
        conv = archive.create_conversation("new")
        question = archive.add_message(conv.id, "user", "How do I undo a git commit?")
        long_answer = archive.add_message(conv.id, "assistant",
                                          "\n\n".join(["Use git revert to make a new commit that "
                                                       "undoes the old one. " * 15] * 4))
        fork = archive.fork(question.id, title="fork")
        assert indexer.flush(timeout=120)
    finally:
        indexer.close()
    store = VectorStore(archive.conn)
    model_id = store.model_id(embedder.fingerprint)
    rows = dict(archive.conn.execute(
        "SELECT message_id, count(*) FROM message_vectors GROUP BY message_id").fetchall())
    assert rows[question.id] == 1 and rows[long_answer.id] > 1
    assert store.count_unindexed(model_id) == sum(len(t) for t in CHATS.values())
    assert archive.delete_conversation(conv.id) == 1  # the question stays: the fork reaches it
    assert archive.conn.execute("SELECT count(*) FROM message_vectors WHERE message_id = ?",
                                (long_answer.id,)).fetchone()[0] == 0
    assert archive.conn.execute("SELECT count(*) FROM message_vectors WHERE message_id = ?",
                                (question.id,)).fetchone()[0] == 1
    archive.delete_conversation(fork.id)
    assert archive.conn.execute("SELECT count(*) FROM message_vectors").fetchone()[0] == 0


def test_another_embedding_model_is_another_index(indexed, embedder, tiny_bert):
    archive, convs, m = indexed
    other = Embedder.open(archive, str(tiny_bert[1]))
    try:
        assert other.fingerprint != embedder.fingerprint
        assert VectorStore(archive.conn).model_id(other.fingerprint) is None
        report = Indexer(archive, other).run()
        assert report.embedded == archive.count_messages() and report.already == 0
        store = VectorStore(archive.conn)
        other_id = store.model_id(other.fingerprint)
        assert other_id != m.model_id
        assert {i.dims for i in store.indexes()} == {embedder.dims, other.dims}
        # each searches only its own vectors (of its own dimensions)
        hits = search(archive.conn, "cat", by="meaning",
                      meaning=Meaning(other_id, other.embed_query("the cat sat")))
        assert all(h.similarity is not None for h in hits)
        again = by_meaning(archive, embedder, m.model_id, "fixing unreliable transfers to cloud storage")
        assert archive.message(again[0].message_id).conversation_id == convs["uploads"]
    finally:
        other.close()


def test_the_passes_over_sign_bits_keep_the_nearest():
    """The asymmetric score is the query summed over set bits; the Hamming cut keeps at
    least what it is asked to, every row nearer than the cut included; the passes
    together keep the exact nearest of vectors near the query."""
    import numpy as np

    from chatdb.search.meaning import asymmetric_scores, narrowed, nearest_by_hamming, sign_bits

    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((30_000, 384)).astype(np.float32)
    query = rng.standard_normal(384).astype(np.float32)
    near = query + 0.6 * rng.standard_normal((10, 384)).astype(np.float32)
    vectors[rng.choice(len(vectors), 10, replace=False)] = near
    bits = sign_bits(vectors)
    assert np.allclose(asymmetric_scores(bits, query), (vectors > 0) @ query, atol=1e-3)
    kept = nearest_by_hamming(bits, sign_bits(query[None, :]), 1_000)
    distance = ((vectors > 0) != (query > 0)).sum(axis=1)
    assert len(kept) >= 1_000 and set(np.flatnonzero(distance < distance[kept].max())) <= set(kept)
    exact = set(np.argsort(-(vectors @ query))[:10])
    assert exact <= set(narrowed(bits, query, 5_000, 300))


@pytest.mark.parametrize("by", ["meaning", "both"])
def test_meaning_and_both_keep_to_a_tag(indexed, embedder, by):
    archive, convs, m = indexed
    archive.tags.add(convs["baking"], ["kitchen"])
    query = "fixing unreliable transfers to cloud storage"   # the uploads chat, by meaning
    assert by_meaning(archive, embedder, m.model_id, query, by=by, limit=3)[0].conversation_id \
        == convs["uploads"]
    tagged = by_meaning(archive, embedder, m.model_id, query, by=by, tags=["Kitchen"])
    assert {h.conversation_id for h in tagged} <= {convs["baking"]}
    named = search(archive.conn, f"tag:kitchen {query}", by=by,
                   meaning=Meaning(m.model_id, embedder.embed_query(query)))
    assert [h.message_id for h in named] == [h.message_id for h in tagged]
    archive.tags.add(convs["uploads"], ["kitchen"])
    again = by_meaning(archive, embedder, m.model_id, query, by=by, tags=["kitchen"], limit=3)
    assert again[0].conversation_id == convs["uploads"]
