"""The context window: anchored at a message, moving in steps, the same for the same path."""

import numpy as np

from chatdb.records import Message
from engine.prompt.path_tokens import PathTokens
from engine.prompt.window import fit_window


def _path(lengths, system=True):
    roles = (["system"] if system else []) + ["user", "assistant"] * len(lengths)
    sizes = ([20] if system else []) + [n for pair in lengths for n in pair]
    messages = [Message(i + 1, f"u{i}", i or None, 1, i, role, "x", "complete", "")
                for i, role in enumerate(roles)]
    tokens = PathTokens([m.id for m in messages], [np.zeros(n, np.int32) for n in sizes])
    return messages, tokens


def test_a_path_that_fits_is_whole():
    messages, tokens = _path([(30, 50)] * 3)
    window = fit_window(tokens, messages, 1000, None)
    assert window.left_out == 0 and window.anchor is None and window.tokens is tokens


def test_the_window_moves_in_steps_and_stays_put_between_them():
    budget, turns = 4000, 200
    lengths = [(30 + (7 * t) % 40, 60 + (13 * t) % 90) for t in range(turns)]
    anchors, moves = [], 0
    for t in range(1, turns + 1):
        messages, tokens = _path(lengths[:t])
        window = fit_window(tokens, messages, budget, None)
        assert sum(window.tokens.lengths) <= budget
        assert window.tokens.message_ids[0] == 1           # the system prompt stays
        if window.anchor is not None:
            anchor = messages[[m.id for m in messages].index(window.anchor)]
            assert anchor.role == "user" and window.tokens.message_ids[1] == anchor.id
            if anchors and anchors[-1] != anchor.id:
                moves += 1
                assert anchor.id > anchors[-1]             # only forward
            anchors.append(anchor.id)
    total = sum(a + b for a, b in lengths)
    assert anchors and moves <= 2 * total // budget + 1   # about once per half a context
    assert len(anchors) - moves > 5 * moves               # most turns keep the window


def test_the_same_path_gets_the_same_window():
    messages, tokens = _path([(40, 90)] * 40)
    first = fit_window(tokens, messages, 700, None)
    again = fit_window(PathTokens(list(tokens.message_ids), list(tokens.arrays)), messages, 700, None)
    assert first.anchor == again.anchor and first.tokens.message_ids == again.tokens.message_ids
