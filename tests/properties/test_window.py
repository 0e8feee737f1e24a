"""The context window, on random paths and budgets: it always holds the newest message and
the system prompt, keeps a run of the newest messages whole, and fits where they can."""

import numpy as np
from hypothesis import given, strategies as st

from chatdb.records import Message
from engine.prompt.path_tokens import PathTokens
from engine.prompt.window import fit_path, fit_window


@st.composite
def paths(draw):
    system = draw(st.booleans())
    roles = (["system"] if system else []) + draw(
        st.lists(st.sampled_from(["user", "assistant", "tool"]), min_size=1, max_size=60))
    sizes = [draw(st.integers(1, 300)) for _ in roles]
    # Texts whose length makes the lazy reader's estimate (3 bytes a token) near the truth,
    # or anything: the window's choice must hold either way.
    skew = draw(st.sampled_from([0.0, 1.0, 3.0]))
    messages = [Message(i + 1, f"u{i}", i or None, 1, i, role, "x" * int(3 * n * skew),
                        "complete", "") for i, (role, n) in enumerate(zip(roles, sizes))]
    tokens = PathTokens([m.id for m in messages], [np.zeros(n, np.int32) for n in sizes])
    return messages, tokens, draw(st.integers(1, 4000))


class _Lazy:
    """What fit_path reads a path through (PromptBuilder.lazy)."""

    def __init__(self, messages, tokens):
        self.path, self.arrays = messages, tokens.arrays

    def length(self, i):
        return len(self.arrays[i])

    def tokens(self, indexes):
        indexes = list(indexes)
        return PathTokens([self.path[i].id for i in indexes], [self.arrays[i] for i in indexes])

    def store(self):
        pass


def check(window, messages, tokens, budget):
    ids, kept = [m.id for m in messages], window.tokens.message_ids
    assert kept[-1] == ids[-1]                                   # the newest message
    head = 1 if messages[0].role == "system" else 0
    if head:
        assert kept[0] == ids[0]                                 # the system prompt
    suffix = kept[head:]
    assert suffix == ids[len(ids) - len(suffix):]               # the newest, whole and in order
    assert window.left_out == len(ids) - head - len(suffix)
    lengths = tokens.lengths
    if sum(lengths[:head]) + lengths[-1] <= budget:              # it can fit: it does
        assert sum(window.tokens.lengths) <= budget
    if window.left_out:
        assert window.anchor == suffix[0]


@given(paths())
def test_the_window_holds_the_newest_message_and_the_system_prompt(case):
    messages, tokens, budget = case
    check(fit_window(tokens, messages, budget, None), messages, tokens, budget)


@given(paths())
def test_the_window_read_lazily_holds_them_too(case):
    messages, tokens, budget = case
    lazy = _Lazy(messages, tokens)
    window = fit_path(type("Prompts", (), {"lazy": lambda self, path: lazy})(), messages, budget)
    check(window, messages, tokens, budget)
