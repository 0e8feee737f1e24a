"""KV rows cut from llama.cpp's state and joined back are the same state."""

import numpy as np
import pytest

from engine.state import kvlayout, segment_split
from engine.llama.decoder import Decoder
from engine.llama.model import ContextConfig, Model
from engine.state.row_round_trip import round_trip
from engine.llama.sampling import Sampler, SamplingSettings


@pytest.fixture(params=[True, False], ids=["flash-attn", "v-transposed"])
def model(request, model_path):
    """The default model with flash attention (V as rows) and without (V transposed)."""
    # One thread: two wait for each other at every layer, and stall whenever
    # another process (another test) holds one of the cores.
    config = ContextConfig(n_ctx=512, n_batch=512, n_threads=1, flash_attn=request.param)
    m = Model(str(model_path), config)
    yield m
    m.close()


def _greedy(model):
    with Sampler(SamplingSettings(temperature=0)) as sampler:
        return sampler.sample(model.ctx)


def test_rows_round_trip_byte_exact_and_same_next_token(model):
    tokens = model.tokenize("The quick brown fox jumps over the lazy dog. " * 8)
    decoder = Decoder(model)
    decoder.prefill(tokens, 0)
    live_next = _greedy(model)
    state = model.get_state()
    layout = kvlayout.parse(state)
    assert layout.n_cells == len(tokens) and layout.v_trans == (not model.config.flash_attn)
    cuts = [0, 5, 40, len(tokens)]
    segments = [kvlayout.cut(state, layout, a, b) for a, b in zip(cuts, cuts[1:])]
    rebuilt = kvlayout.state_from(layout, segments, len(tokens))
    assert rebuilt.tobytes() == bytes(state)

    # Restore everything but the last token, recompute it: same greedy choice.
    model.clear()
    assert model.set_state(rebuilt)
    model.forget_from(len(tokens) - 1)
    decoder.prefill(tokens[-1:], len(tokens) - 1)
    assert _greedy(model) == live_next
    decoder.close()


def test_segments_placed_from_byte_planes_equal_the_state(model):
    tokens = model.tokenize("one two three four five six seven eight nine ten")
    decoder = Decoder(model)
    decoder.prefill(tokens, 0)
    state = model.get_state()
    layout = kvlayout.parse(state)
    assembly, first = kvlayout.Assembly(layout, len(tokens)), 0
    for a, b in [(3, 7), (0, 3), (7, len(tokens))]:  # any order: each writes its own tokens
        segment = np.frombuffer(kvlayout.cut(state, layout, a, b), np.uint8)
        planes = np.stack([segment[0::2], segment[1::2]])
        assert assembly.place_planes(planes, a) == b - a
    assert assembly.buffer.tobytes() == bytes(state)
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
        kvlayout.state_from(layout, [whole[:-1]], len(tokens))
    with pytest.raises(kvlayout.LayoutMismatch):
        kvlayout.parse(bytes(state)[:-3])
    decoder.close()
    assert np.frombuffer(whole, np.uint8).size == len(tokens) * layout.bytes_per_token


def test_the_start_up_round_trip_takes_the_restore_path(model):
    tokens = model.tokenize("one two three four five six seven eight nine ten")
    decoder = Decoder(model)
    decoder.prefill(tokens, 0)
    state = model.get_state()
    layout = round_trip(model, state, at=4)  # encoded, decoded and placed as planes
    assert layout.n_cells == len(tokens)
    # A state whose cells are not what the layout says is refused.
    damaged = bytearray(state)
    damaged[16:20] = (7).to_bytes(4, "little")  # the first cell's position
    with pytest.raises(kvlayout.LayoutMismatch):
        round_trip(model, bytes(damaged), at=4)
    decoder.close()


def _split_and_rejoined(layout, segment, n, k):
    """Split `segment` (n tokens) at k: the pieces join back to it, and leading_equal
    finds the first token whose rows differ in a copy changed there."""
    head, rest = segment_split.split_segment(layout, segment, n, k)
    assert segment_split.join_pieces(layout, head, k, rest, n) == segment
    assert segment_split.leading_equal(layout, segment, n, segment, n) == n
    return head, rest


def test_a_segment_split_at_a_token_is_placed_as_two_segments(model):
    tokens = model.tokenize("The quick brown fox jumps over the lazy dog. " * 8)
    decoder = Decoder(model)
    decoder.prefill(tokens, 0)
    decoder.close()
    state = model.get_state()
    layout = kvlayout.parse(state)
    n = len(tokens)
    middle = kvlayout.cut(state, layout, 5, 40)
    head, rest = _split_and_rejoined(layout, middle, 35, 7)
    pieces = [kvlayout.cut(state, layout, 0, 5), head, rest, kvlayout.cut(state, layout, 40, n)]
    assert kvlayout.state_from(layout, pieces, n, [5, 7, 28, n - 40]).tobytes() == bytes(state)
    changed = np.frombuffer(middle, np.uint8).copy()
    blocks = segment_split.blocks_of(layout, changed, 35)
    blocks[-1][1][0, 9, 0] ^= 1   # the last block's first run, token 9
    assert segment_split.leading_equal(layout, middle, 35, changed.tobytes(), 35) == 9


def test_a_sliding_window_segment_splits_before_and_inside_its_window(gemma_path):
    m = Model(str(gemma_path), ContextConfig(n_ctx=1024, n_batch=1024, n_threads=1,   # as model's
                                             flash_attn=False))
    try:
        tokens = m.tokenize(" ".join(f"Item {i} is a box." for i in range(110)))[:600]
        decoder = Decoder(m)
        decoder.prefill(tokens, 0)
        decoder.close()
        state = m.get_state()
        layout = kvlayout.parse(state, window=m.n_swa)
    finally:
        m.close()
    n = len(tokens)
    segment = kvlayout.cut(state, layout, 0, n)
    assert layout.tail(n, len(segment)) == layout.window < n   # sliding-window rows of the last 512 only
    for k in (n - layout.window - 30, n - layout.window + 30):  # the head without, and with, some of them
        head, rest = _split_and_rejoined(layout, segment, n, k)
        assert layout.tail(k, len(head)) == max(0, k - (n - layout.window))
        whole = kvlayout.state_from(layout, [segment], n, [n])
        assert kvlayout.state_from(layout, [head, rest], n, [k, n - k]).tobytes() == whole.tobytes()
