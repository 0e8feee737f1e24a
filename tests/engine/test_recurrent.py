"""A purely recurrent model (Mamba): its whole state, which has the same size whatever
the length, is stored as bounded checkpoints at message ends and restored exactly.

The model is tiny, with random weights (tests/assets/tiny_mamba.py): what is
checked is the state llama.cpp holds, which does not depend on what the
weights mean. Answers are compared with answers computed from scratch.
"""

import pytest

from .checkpoint_chats import assert_fork_restores_the_first_stretch, live_states, past_a_stretch, segments
from .conftest import restored_from_archive
from .test_gemma import path_tokens


@pytest.fixture
def mamba_engine(open_engine, mamba_path):
    def factory(db=None, **kw):
        return open_engine(db, model_path=mamba_path, n_ctx=4096, **kw)
    return factory


def test_one_checkpoint_per_chain_restores_the_live_state(mamba_engine, db_path):
    archive, engine = mamba_engine()
    assert engine.kv_mode == "snapshot" and engine.draft_mode == "off"
    live = live_states(engine, archive.create_conversation("m").id)
    # The state has one size whatever the length, and only the head's is kept:
    # each new one superseded the last (same stretch, no branch point).
    assert len({len(state) for _, state in live}) == 1
    head_id, head_state = live[-1]
    assert segments(db_path) == [(head_id, "snapshot", path_tokens(db_path, head_id), len(head_state))]
    assert restored_from_archive(engine, archive, head_id) == head_state


def test_resume_and_a_fork_from_the_nearest_checkpoint_equal_recompute(tmp_path, mamba_engine, mamba_path):
    db = tmp_path / "a.db"
    one, two, three, ends = past_a_stretch(db, mamba_path)
    assert two["kv"]["source"] == "archive"
    assert two["kv"]["restored_tokens"] == ends[0]
    # The deepest checkpoint of the first 2,048-token stretch, and the head's.
    assert [r[0] for r in segments(db)] == [one["message_id"], three["message_id"]]
    assert_fork_restores_the_first_stretch(db, mamba_path, one, two, ends,
                                           mamba_engine(tmp_path / "b.db", use_kv=False))
