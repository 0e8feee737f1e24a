"""Full-text search: ranking, snippets, diacritics, CJK substrings, hostile
queries, filters, deletion, and the shortcuts that keep large archives fast."""

import pytest

from chatdb.search import filters, query, ranking
from chatdb.errors import NotFound
from chatdb.search.fulltext import MARK_END, MARK_START, SearchError, mark, search

FILLER = ["the weather was mild", "we talked about dinner plans", "a note on gardening",
          "trains leave at noon", "nothing much happened today", "some music for later"]


def add(archive, conv_id, content, role="user", at=None):
    return archive.add_message(conv_id, role, content, created_at=at)


def stamp(day: int, second: int = 0) -> str:
    return f"2026-11-{day:02d}T10:00:{second:02d}.000Z"


@pytest.fixture
def conv(archive):
    """A conversation holding FILLER, so that test words are in few messages (real idf)."""
    conv = archive.create_conversation("notes")
    for i, text in enumerate(FILLER):
        add(archive, conv.id, text, at=stamp(1, i))
    return conv


def found(archive, query, **filters):
    return [hit.message_id for hit in search(archive.conn, query, **filters)]


# -- ranking -------------------------------------------------------------------

def test_better_match_ranks_first_even_when_older(archive, conv):
    strong = add(archive, conv.id, "lifetime lifetime lifetime", at=stamp(2))
    weak = add(archive, conv.id, "a long story that mentions a lifetime once, among many other "
                                 "words about borrowing and ownership", at=stamp(3))
    hits = search(archive.conn, "lifetime")
    assert [h.message_id for h in hits] == [strong.id, weak.id]
    assert hits[0].score < hits[1].score  # bm25: lower is better
    # A small archive is scored exactly as FTS5 scores it.
    direct = archive.conn.execute("SELECT bm25(messages_fts) FROM messages_fts WHERE "
                                  "messages_fts MATCH 'lifetime' AND rowid = ?", (weak.id,))
    assert hits[1].score == pytest.approx(direct.fetchone()[0])


def test_equal_scores_put_the_newer_message_first(archive, conv):
    # Written in the opposite order of their dates: rowid order would be wrong.
    newer = add(archive, conv.id, "identical words about zebras", at=stamp(20))
    older = add(archive, conv.id, "identical words about zebras", at=stamp(10))
    hits = search(archive.conn, "zebras")
    assert hits[0].score == hits[1].score
    assert [h.message_id for h in hits] == [newer.id, older.id]


def test_limit(archive, conv):
    for day in range(2, 8):
        add(archive, conv.id, f"kiwi number {day}", at=stamp(day))
    assert len(search(archive.conn, "kiwi", limit=3)) == 3
    assert len(search(archive.conn, "kiwi")) == 6


# -- hits and snippets ---------------------------------------------------------

def test_hit_fields_and_marked_snippet(archive, conv):
    text = ("Rust is a language. " * 10 + "A lifetime tells the compiler how long a "
            "reference is valid. " + "Ownership moves values around. " * 10)
    message = add(archive, conv.id, text, role="assistant", at=stamp(2))
    [hit] = search(archive.conn, "lifetime")
    assert (hit.conversation_id, hit.message_id, hit.role, hit.title, hit.created_at) == (
        conv.id, message.id, "assistant", "notes", stamp(2))
    assert f"{MARK_START}lifetime{MARK_END}" in hit.snippet
    assert "[lifetime]" in mark(hit.snippet, "[", "]")
    assert MARK_START not in mark(hit.snippet, "[", "]")
    assert len(hit.snippet) < len(text) / 2 and "…" in hit.snippet  # a window, not the text


def test_snippet_marks_every_query_word_and_only_those(archive, conv):
    add(archive, conv.id, "the borrow checker rejects this borrow", at=stamp(2))
    [hit] = search(archive.conn, "borrow checker")
    assert mark(hit.snippet, "[", "]") == "the [borrow] [checker] rejects this [borrow]"


def test_mark_characters_in_a_message_are_not_taken_for_marks(archive, conv):
    add(archive, conv.id, f"odd {MARK_START}bytes{MARK_END} near the lifetime", at=stamp(2))
    [hit] = search(archive.conn, "lifetime")
    assert hit.snippet.count(MARK_START) == hit.snippet.count(MARK_END) == 1


# -- diacritics and CJK ----------------------------------------------------------

@pytest.mark.parametrize("text, query", [
    ("un café crème", "cafe"),        # plain query, accented text
    ("a cafe au lait", "café"),       # accented query, plain text
    ("NAÏVE approach", "naive"),
    ("naive approach", "Naïve"),
    ("São Paulo", "sao paulo"),
    ("Ångström units", "angstrom"),
])
def test_diacritics_match_both_ways(archive, conv, text, query):
    message = add(archive, conv.id, text, at=stamp(2))
    assert found(archive, query) == [message.id]


@pytest.mark.parametrize("query", ["东京", "吃拉面", "我喜欢在东京吃拉面"])
def test_chinese_substrings_of_two_or_more_characters(archive, conv, query):
    message = add(archive, conv.id, "我喜欢在东京吃拉面。", at=stamp(2))
    add(archive, conv.id, "京都很好", at=stamp(3))  # shares 京, not 东京
    assert found(archive, query) == [message.id]


@pytest.mark.parametrize("query", ["タワー", "行き", "東京タワー", "タワーに行"])
def test_japanese_substrings(archive, conv, query):
    message = add(archive, conv.id, "昨日、東京タワーに行きました。", at=stamp(2))
    add(archive, conv.id, "ワータの東", at=stamp(3))  # the same characters, another order
    assert found(archive, query) == [message.id]


def test_an_ideographic_space_separates_words(archive, conv):
    trip = add(archive, conv.id, "大阪から東京へ", at=stamp(2))
    drinks = add(archive, conv.id, "noir first, café later", at=stamp(3))
    assert found(archive, "東京\u3000大阪") == [trip.id]
    assert found(archive, "cafe\u3000noir") == [drinks.id]


def test_cjk_characters_must_be_adjacent(archive, conv):
    add(archive, conv.id, "我喜欢在东京吃拉面", at=stamp(2))
    assert found(archive, "东吃") == []
    assert found(archive, "面拉") == []


def test_cjk_snippet_shows_text_unspaced(archive, conv):
    add(archive, conv.id, "昨日、東京タワーに行きました。Then back to the hotel.", at=stamp(2))
    [hit] = search(archive.conn, "東京タワー")
    assert mark(hit.snippet, "[", "]").startswith("昨日、[東京タワー]に行きました。Then")


def test_cjk_inside_fts5_syntax(archive, conv):
    tower = add(archive, conv.id, "東京タワーに行きました", at=stamp(2))
    temple = add(archive, conv.id, "京都の清水寺", at=stamp(3))
    assert set(found(archive, "東京タワー OR 清水寺")) == {tower.id, temple.id}
    assert found(archive, '"京都"') == [temple.id]
    assert found(archive, "東京* NOT 清水") == [tower.id]


# -- query syntax --------------------------------------------------------------

HOSTILE = ["C++", '"unbalanced', "foo-bar", "*", "AND", "col:x", "", "   ", "NOT", "OR x",
           "(", ")", '"', '"""', "a OR", "NEAR(", "NEAR(a b", "^", ":", "{", "}:x", "-x",
           "body:", "x*y", "it's", "c#", "'; DROP TABLE messages; --", "\x00", "\x02\x03",
           "a" * 5000, "AND OR NOT", "NEAR(a b, -1)", "*foo", "+"]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_never_raise(archive, conv, query):
    add(archive, conv.id, "C++ and foo-bar; col:x it's c# x*y", at=stamp(2))
    assert isinstance(search(archive.conn, query), list)
    assert archive.count_messages() == len(FILLER) + 1


@pytest.mark.parametrize("query, text", [
    ("C++", "I write C++ every day"),
    ('"unbalanced', "unbalanced parentheses"),
    ("foo-bar", "the foo-bar module"),
    ("AND", "rock and roll"),
    ("col:x", "set col:x in the config"),
    ("it's", "it's raining"),
    ("NOT", "do not panic"),
    ("lifetime)", "a lifetime"),
])
def test_invalid_syntax_is_searched_as_plain_words(archive, conv, query, text):
    message = add(archive, conv.id, text, at=stamp(2))
    assert found(archive, query) == [message.id]


def test_plain_words_keep_their_order_within_a_word(archive, conv):
    adjacent = add(archive, conv.id, "the foo-bar module", at=stamp(2))
    add(archive, conv.id, "bar comes before foo here", at=stamp(3))
    assert found(archive, "foo-bar") == [adjacent.id]


def test_a_word_said_many_times_is_searched_once(archive, conv):
    message = add(archive, conv.id, "lifetime of a borrow", at=stamp(2))
    assert found(archive, " ".join(["lifetime", "borrow"] * 8000)) == [message.id]
    assert found(archive, " ".join(["foo-bar("] * 8000)) == []


def test_a_query_of_thousands_of_words_is_refused(archive, conv):
    add(archive, conv.id, " ".join(f"w{i}" for i in range(300)), at=stamp(2))
    assert len(found(archive, " ".join(f"w{i}" for i in range(query.MAX_TERMS)))) == 1
    with pytest.raises(SearchError, match="16,000 different words; at most 256"):
        search(archive.conn, " ".join(f"w{i}" for i in range(16_000)))


@pytest.mark.parametrize("query", ["", "   ", "*", '"', "\t\n", "+ - :"])
def test_nothing_to_search_finds_nothing(archive, conv, query):
    assert search(archive.conn, query) == []


def test_fts5_syntax_for_those_who_know_it(archive, conv):
    ny = add(archive, conv.id, "pizza in new york", at=stamp(2))
    yn = add(archive, conv.id, "york is not new", at=stamp(3))
    life = add(archive, conv.id, "lifetimes and lifecycles", at=stamp(4))
    assert found(archive, '"new york"') == [ny.id]
    assert set(found(archive, "new york")) == {ny.id, yn.id}
    assert found(archive, "new NOT pizza") == [yn.id]
    assert set(found(archive, "pizza OR lifecycles")) == {ny.id, life.id}
    assert found(archive, "lifet*") == [life.id]
    assert found(archive, "NEAR(pizza york, 2)") == [ny.id]
    assert found(archive, "NEAR(york new, 0)") == [ny.id]  # NEAR ignores order
    assert found(archive, "body:pizza") == [ny.id]


# -- filters -------------------------------------------------------------------

def test_conversation_filter_follows_forks_to_shared_ancestors(archive, conv):
    trip = archive.create_conversation("trip")
    question = add(archive, trip.id, "where to eat ramen", at=stamp(2))
    add(archive, trip.id, "ramen at Ichiran", role="assistant", at=stamp(3))
    fork = archive.fork(question.id, title="trip (fork)")
    retry = add(archive, fork.id, "ramen at Fuunji instead", role="assistant", at=stamp(4))
    elsewhere = add(archive, conv.id, "ramen recipe", at=stamp(5))

    in_fork = search(archive.conn, "ramen", conversation_id=fork.id)
    assert {h.message_id for h in in_fork} == {question.id, retry.id}
    # The shared question still belongs to the conversation that wrote it.
    assert {h.message_id: h.conversation_id for h in in_fork}[question.id] == trip.id
    assert len(found(archive, "ramen", conversation_id=trip.id)) == 2
    assert found(archive, "ramen", conversation_id=conv.id) == [elsewhere.id]
    assert len(found(archive, "ramen")) == 4


def test_a_fresh_fork_reaches_its_head(archive, conv):
    trip = archive.create_conversation("trip")
    first = add(archive, trip.id, "ramen first", at=stamp(2))
    add(archive, trip.id, "ramen second", at=stamp(3))
    fork = archive.fork(first.id)  # writes nothing yet
    assert found(archive, "ramen", conversation_id=fork.id) == [first.id]


def test_role_filter(archive, conv):
    question = add(archive, conv.id, "what is a monad", at=stamp(2))
    answer = add(archive, conv.id, "a monad is a monoid", role="assistant", at=stamp(3))
    assert found(archive, "monad", role="user") == [question.id]
    assert found(archive, "monad", role="assistant") == [answer.id]
    assert found(archive, "monad", role="system") == []


@pytest.fixture(params=["scan", "index"])
def date_index(request, archive):
    """With an index on created_at, dates bound the rowids searched; both ways must agree."""
    if request.param == "index":
        archive.conn.execute("CREATE INDEX test_messages_by_created ON messages(created_at)")


def test_date_range_with_dates_and_times(archive, conv, date_index):
    days = {}
    for when in ("2026-10-31T23:59:59.999Z", "2026-11-01T00:00:00.000Z", "2026-11-15T12:00:00.000Z",
                 "2026-11-30T23:59:59.999Z", "2026-12-01T00:00:00.000Z"):
        days[when] = add(archive, conv.id, f"quokka seen {when}", at=when).id
    ids = list(days.values())
    # A date as `until` takes in that whole day.
    assert set(found(archive, "quokka", since="2026-11-01", until="2026-11-30")) == set(ids[1:4])
    assert set(found(archive, "quokka", since="2026-11-30")) == set(ids[3:])
    assert set(found(archive, "quokka", until="2026-10-31")) == {ids[0]}
    # Times are instants: since is inclusive, until too.
    assert set(found(archive, "quokka", since="2026-11-15T12:00:00Z",
                     until="2026-11-30T23:59:59.999Z")) == set(ids[2:4])
    assert set(found(archive, "quokka", since="2026-11-15T12:00:00.001Z")) == set(ids[3:])
    # An offset is honoured: 13:00+01:00 is 12:00 UTC.
    assert set(found(archive, "quokka", until="2026-11-15T13:00:00+01:00")) == set(ids[:3])
    assert found(archive, "quokka", since="2027-01-01") == []


def test_filters_combine(archive, conv):
    other = archive.create_conversation("other")
    keep = add(archive, conv.id, "wombat facts", role="assistant", at=stamp(10))
    add(archive, conv.id, "wombat facts", role="user", at=stamp(10))
    add(archive, conv.id, "wombat facts", role="assistant", at=stamp(20))
    add(archive, other.id, "wombat facts", role="assistant", at=stamp(10))
    assert found(archive, "wombat", conversation_id=conv.id, role="assistant",
                 since="2026-11-05", until="2026-11-15") == [keep.id]


@pytest.mark.parametrize("filters", [
    {"since": "2026-11-02", "until": "2026-11-01"},
    {"since": "2026-11-01T10:00:00Z", "until": "2026-11-01T09:59:59Z"},
    {"since": "last tuesday"},
    {"until": "2026-13-01"},
    {"until": "9999-12-31"},
    {"since": "0001-01-01T00:00:00+01:00"},
    {"role": "robot"},
    {"limit": 0},
    {"limit": -5},
])
def test_impossible_arguments_raise_search_error(archive, conv, filters):
    with pytest.raises(SearchError):
        search(archive.conn, "weather", **filters)


def test_unknown_conversation_is_not_found(archive, conv):
    with pytest.raises(NotFound):
        search(archive.conn, "weather", conversation_id=9999)


# -- changes -------------------------------------------------------------------

def test_deleted_messages_vanish_and_shared_ones_move_to_the_fork(archive, conv):
    trip = archive.create_conversation("trip")
    shared = add(archive, trip.id, "capybara question", at=stamp(2))
    add(archive, trip.id, "capybara answer", role="assistant", at=stamp(3))
    fork = archive.fork(shared.id, title="kept fork")
    archive.delete_conversation(trip.id)

    hits = search(archive.conn, "capybara")
    assert [h.message_id for h in hits] == [shared.id]
    # Its writer is gone: the hit names the fork that still reaches it.
    assert (hits[0].conversation_id, hits[0].title) == (fork.id, "kept fork")
    archive.delete_conversation(fork.id)
    assert search(archive.conn, "capybara") == []


def test_search_inside_a_callers_transaction(archive, conv):
    with archive.transaction():
        message = add(archive, conv.id, "uncommitted narwhal", at=stamp(2))
        assert found(archive, "narwhal") == [message.id]


# -- the shortcuts of large archives, forced on a small one --------------------

@pytest.fixture
def large(monkeypatch):
    """Search as if the archive were large: few candidates, common phrases dropped."""
    monkeypatch.setattr(ranking, "CANDIDATES", 4)
    monkeypatch.setattr(query, "EXACT_BELOW", 0)
    monkeypatch.setattr(query, "COMMON_SAMPLE", 20)
    monkeypatch.setattr(filters, "SPAN_GAP", 0)
    monkeypatch.setattr(filters, "MAX_SPANS", 2)


def test_only_the_newest_candidates_are_ranked(archive, conv, large, monkeypatch):
    best_but_old = add(archive, conv.id, "owl owl owl", at=stamp(2))
    newer = [add(archive, conv.id, f"an owl in a sentence number {i}", at=stamp(3, i)).id
             for i in range(6)]
    assert found(archive, "owl", limit=3) == newer[:-4:-1]  # of the newest 4, newest first
    monkeypatch.setattr(ranking, "CANDIDATES", 1000)
    assert found(archive, "owl", limit=3)[0] == best_but_old.id


def test_a_phrase_in_most_messages_does_not_score(archive, conv, large):
    for i in range(12):
        add(archive, conv.id, f"the message {i} says the same thing", at=stamp(2, i))
    rare_once = add(archive, conv.id, "the heron", at=stamp(3))
    rare_twice = add(archive, conv.id, "the heron and the heron", at=stamp(4))
    assert query.scoring_expression(archive.conn, "the heron") == "heron"
    hits = search(archive.conn, "the heron")
    assert [h.message_id for h in hits] == [rare_twice.id, rare_once.id]
    assert hits[0].score < hits[1].score < 0


def test_only_common_phrases_order_by_date(archive, conv, large):
    ids = [add(archive, conv.id, f"the the the {i}" if i == 1 else f"the {i}",
               at=stamp(2 + (i * 7) % 10)).id for i in range(10)]
    hits = search(archive.conn, "the", limit=3)
    assert {h.score for h in hits} == {0.0}
    assert [h.created_at for h in hits] == sorted((h.created_at for h in hits), reverse=True)
    assert hits[0].message_id in ids


def test_filters_look_past_the_newest_candidates_when_too_few_pass(archive, conv, large):
    rule = archive.add_message(conv.id, "system", "heron rules", created_at=stamp(2))
    for i in range(8):
        add(archive, conv.id, f"heron {i}", at=stamp(3, i))
    assert found(archive, "heron", role="system") == [rule.id]
    assert found(archive, "heron", until="2026-11-02") == [rule.id]


def test_filters_over_many_ranges(archive, conv, large):
    trip = archive.create_conversation("trip")
    mine = []
    for i in range(6):
        mine.append(add(archive, trip.id, f"heron sighting {i}", at=stamp(5, i)).id)
        add(archive, conv.id, f"heron elsewhere {i}", at=stamp(5, 30 + i))
    assert found(archive, "heron", conversation_id=trip.id, limit=3) == mine[:-4:-1]
    assert found(archive, "heron", conversation_id=trip.id, role="user",
                 since="2026-11-05", limit=2) == mine[:-3:-1]
