"""KV rows cut from llama.cpp's state and joined back are the same state."""

import numpy as np
import pytest

from engine import kvlayout
from engine.decode import Decoder
from engine.sampling import Sampler, SamplingSettings


def _logits_token(engine):
    with Sampler(SamplingSettings(temperature=0)) as sampler:
        return sampler.sample(engine.model.ctx)


def test_rows_round_trip_byte_exact_and_same_next_token(open_engine):
    _, engine = open_engine()
    model = engine.model
    tokens = model.tokenize("The quick brown fox jumps over the lazy dog. " * 8)
    decoder = Decoder(model)
    decoder.prefill(tokens, 0)
    live_next = _logits_token(engine)
    state = model.get_state()
    layout = kvlayout.parse(state)
    assert layout.n_cells == len(tokens)
    cuts = [0, 5, 40, len(tokens)]
    segments = [kvlayout.cut(state, layout, a, b) for a, b in zip(cuts, cuts[1:])]
    rebuilt = kvlayout.assemble(layout, segments, len(tokens))
    assert rebuilt == bytes(state)

    # Restore everything but the last token, recompute it: same greedy choice.
    model.clear()
    assert model.set_state(rebuilt)
    model.forget_from(len(tokens) - 1)
    decoder.prefill(tokens[-1:], len(tokens) - 1)
    assert _logits_token(engine) == live_next
    decoder.close()


def test_segment_sizes_follow_bytes_per_token(open_engine):
    _, engine = open_engine()
    assert engine.kv_mode == "rows"
    model = engine.model
    tokens = model.tokenize("one two three four five six seven")
    decoder = Decoder(model)
    decoder.prefill(tokens, 0)
    state = model.get_state()
    layout = kvlayout.parse(state)
    assert len(kvlayout.cut(state, layout, 2, 5)) == 3 * layout.bytes_per_token
    decoder.close()


def test_mismatched_segments_are_refused(open_engine):
    _, engine = open_engine()
    tokens = engine.model.tokenize("alpha beta gamma delta")
    decoder = Decoder(engine.model)
    decoder.prefill(tokens, 0)
    state = engine.model.get_state()
    layout = kvlayout.parse(state)
    whole = kvlayout.cut(state, layout, 0, len(tokens))
    with pytest.raises(kvlayout.LayoutMismatch):
        kvlayout.assemble(layout, [whole[:-1]], len(tokens))
    with pytest.raises(kvlayout.LayoutMismatch):
        kvlayout.parse(bytes(state)[:-3])
    decoder.close()
    assert np.frombuffer(whole, np.uint8).size == len(tokens) * layout.bytes_per_token
