"""A purely recurrent model (Mamba): its whole state, which has the same size whatever
the length, is stored as bounded checkpoints at message ends and restored exactly.

The model is tiny, with random weights (tests/assets/tiny_mamba.py): what is
checked is the state llama.cpp holds, which does not depend on what the
weights mean. Answers are compared with answers computed from scratch.
"""

import pytest

from .conftest import restored_from_archive, run_chatdb
from .test_gemma import path_tokens
from .test_hybrid import LONG, segments

ARGS = ("--temperature", "0", "--seed", "1", "--max-tokens", "24", "--ctx", "4096")  # as GREEDY


@pytest.fixture
def mamba_engine(open_engine, mamba_path):
    def factory(db=None, **kw):
        return open_engine(db, model_path=mamba_path, n_ctx=4096, **kw)
    return factory


def test_one_checkpoint_per_chain_restores_the_live_state(mamba_engine, db_path):
    archive, engine = mamba_engine()
    assert engine.kv_mode == "snapshot" and engine.draft_mode == "off"
    conv = archive.create_conversation("m")
    live = []
    for text in ("Hello there.", "Tell me more.", "And then?", "Why?"):
        result = engine.reply(conv.id, text)
        live.append((result.message_id, bytes(engine.model.get_state())))
    engine.flush()
    # The state has one size whatever the length, and only the head's is kept:
    # each new one superseded the last (same stretch, no branch point).
    assert len({len(state) for _, state in live}) == 1
    head_id, head_state = live[-1]
    assert segments(db_path) == [(head_id, "snapshot", path_tokens(db_path, head_id), len(head_state))]
    assert restored_from_archive(engine, archive, head_id) == head_state


def test_resume_and_a_fork_from_the_nearest_checkpoint_equal_recompute(tmp_path, mamba_engine, mamba_path):
    model = ("--model", str(mamba_path))
    db = tmp_path / "a.db"
    one, _ = run_chatdb("ask", "--json", *model, *ARGS, LONG, db=db)
    two, _ = run_chatdb("ask", "--json", "-c", *model, *ARGS, "Which item is blue? " * 20, db=db)
    assert two["kv"]["source"] == "archive"
    assert two["kv"]["restored_tokens"] == path_tokens(db, one["message_id"])
    three, _ = run_chatdb("ask", "--json", "-c", *model, *ARGS, "And which is red?", db=db)
    ends = [path_tokens(db, m["message_id"]) for m in (one, two, three)]
    assert ends[0] < 2048 <= ends[1]
    # The deepest checkpoint of the first 2,048-token stretch, and the head's.
    assert [r[0] for r in segments(db)] == [one["message_id"], three["message_id"]]

    fork, _ = run_chatdb("ask", "--json", "--fork-from", str(two["message_id"]), *model, *ARGS,
                         "Count them.", db=db)
    assert fork["kv"]["source"] == "archive"
    assert fork["kv"]["restored_tokens"] == ends[0]   # the rest is computed
    archive, engine = mamba_engine(tmp_path / "b.db", use_kv=False)
    conv = archive.create_conversation("again")
    for text, expected in ((LONG, one), ("Which item is blue? " * 20, two)):
        assert engine.reply(conv.id, text).text == expected["text"]
    assert engine.reply(conv.id, "Count them.").text == fork["text"]
