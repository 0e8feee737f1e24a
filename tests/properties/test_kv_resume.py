"""Random KV budgets and drops with the real model: no restorable row above a hole, and every
resume answers as a recomputation does.

Each example is a chat of a few turns on a new archive, with the budget changed
(from a fraction of what is stored to more than it) and applied (`prune`, or
room made as for a store) between turns and once more before the resume. After every step each path's stored
rows run from its root down without a hole; at the end the chat is resumed
from the archive alone (nothing live, nothing in memory) and its answer is the
one an engine that stores no KV computes on a copy of the same archive.
"""

from hypothesis import event, given, settings, strategies as st

from chatdb.archive import Archive
from chatdb.kv.report import stored
from engine.chat import Engine
from engine.llama.sampling import SamplingSettings

from ..chatdb_command import DRAFT
from ..kv_tree import assert_rows_are_path_prefixes

GREEDY = SamplingSettings(temperature=0, max_tokens=6, seed=1)
QUESTIONS = ("What is a river?", "And a lake? Say it in other words, please.",
             "Why do tides rise and fall twice a day?", "名前は何ですか", "ok")
STEP = st.one_of(
    st.tuples(st.just("reply"), st.sampled_from(QUESTIONS)),
    st.tuples(st.just("budget"), st.sampled_from([0.1, 0.4, 0.7, 1.0, 2.0])),
    st.tuples(st.just("prune"), st.none()),
    st.tuples(st.just("room"), st.sampled_from([0.2, 0.6])),
    st.tuples(st.just("unlimited"), st.none()))


def apply(step, archive, engine, conv_id) -> None:
    kind, value = step
    if kind == "reply":
        engine.reply(conv_id, value)
        engine.flush()
    elif kind == "budget":
        with archive.transaction():
            archive.kv_budget.set(max(1, int(stored(archive.conn)[0] * value)))
    elif kind == "unlimited":
        with archive.transaction():
            archive.kv_budget.set(None)
    elif kind == "prune":
        archive.kv_keeping.prune()
    else:   # room for a store of that fraction of what is stored, as the writer makes it
        with archive.transaction():
            archive.kv_keeping.make_room(int(stored(archive.conn)[0] * value))


@settings(max_examples=max(3, settings.default.max_examples // 6))
@given(steps=st.lists(STEP, min_size=2, max_size=5), last=st.sampled_from([0.05, 0.3, 0.6, None]))
def test_budgets_and_drops_leave_no_hole_and_resumes_equal_recomputation(tmp_path_factory, steps,
                                                                        last):
    where = tmp_path_factory.mktemp("kv")
    db = where / "a.db"
    with Archive.open(db) as archive:
        engine = Engine.open(archive, sampling=GREEDY, draft=DRAFT, n_ctx=1024)
        try:
            conv = archive.create_conversation("kv", system_prompt="You answer in a few words.")
            engine.reply(conv.id, QUESTIONS[0])
            for step in steps:
                apply(step, archive, engine, conv.id)
                assert_rows_are_path_prefixes(archive)
            engine.flush()
            if last is not None:   # a drop just before the resume: all, part or none of it kept
                apply(("budget", last), archive, engine, conv.id)
                apply(("prune", None), archive, engine, conv.id)
                assert_rows_are_path_prefixes(archive)
            archive.conn.execute("VACUUM INTO ?", (str(where / "copy.db"),))   # with the WAL's
            engine.cache.reset()                 # nothing live, nothing in memory: the archive
            engine.cache.memory.entries.clear()
            resumed = engine.reply(conv.id, "And then?")
            engine.flush()
            assert_rows_are_path_prefixes(archive)
        finally:
            engine.close()
    with Archive.open(where / "copy.db") as copy:
        plain = Engine.open(copy, sampling=GREEDY, draft=DRAFT, n_ctx=1024, use_kv=False)
        try:
            recomputed = plain.reply(conv.id, "And then?")
        finally:
            plain.close()
    event("resumed: " + ("all restored" if resumed.computed_tokens <= 12 else
                         "part restored" if resumed.restored_tokens else "nothing restored"))
    assert resumed.text == recomputed.text
    assert resumed.restored_tokens + resumed.computed_tokens == recomputed.computed_tokens
