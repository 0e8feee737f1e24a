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


class _Lazy:
    """What fit_path reads a path through (PromptBuilder.lazy), counting what it tokenizes."""

    def __init__(self, messages, tokens):
        self.path, self.arrays, self.asked = messages, tokens.arrays, set()

    def length(self, i):
        self.asked.add(i)
        return len(self.arrays[i])

    def tokens(self, indexes):
        indexes = list(indexes)
        for i in indexes:
            self.asked.add(i)
        return PathTokens([self.path[i].id for i in indexes], [self.arrays[i] for i in indexes])

    def store(self):
        pass


def _texts_as_long(messages, tokens):
    """Contents whose length makes the window's estimate (3 bytes a token) about right."""
    return [Message(m.id, m.uid, m.parent_id, m.conversation_id, m.depth, m.role,
                    "x" * (3 * max(0, n - 4)), m.status, m.created_at)
            for m, n in zip(messages, tokens.lengths)]


def test_a_long_path_is_read_from_its_end_only_and_its_window_moves_in_steps():
    from engine.prompt.window import fit_path

    budget, lengths = 2000, [(30 + (7 * t) % 40, 60 + (13 * t) % 90) for t in range(400)]
    anchors, moves = [], 0
    for t in (100, 200, 300, 301, 302, 303, 350, 400):
        messages, tokens = _path(lengths[:t])
        messages = _texts_as_long(messages, tokens)
        lazy = _Lazy(messages, tokens)
        window = fit_path(type("Prompts", (), {"lazy": lambda self, path: lazy})(), messages, budget)
        assert sum(window.tokens.lengths) <= budget and window.tokens.message_ids[0] == 1
        assert len(lazy.asked) < len(window.tokens.lengths) + 40   # its end, not all of it
        if anchors and anchors[-1] != window.anchor:
            moves += 1
        anchors.append(window.anchor)
    assert anchors[3] == anchors[4] == anchors[5]   # a turn or two later: the same window
    assert moves <= 5
