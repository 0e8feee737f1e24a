"""The start-up check that a model's KV can be cut into per-token rows.

Plain attention: a tiny live state cut at a message boundary comes back
byte for byte through the path restores take (row_round_trip). Interleaved
sliding-window attention: the state rebuilt from two segments (its
sliding-window cache widened to every position) is loaded into llama.cpp,
and the state llama.cpp then writes must be the live one, byte for byte.
Hybrid (attention and recurrent layers): the attention part makes the plain
round trip, and the state rebuilt from its rows and the recurrent part
(recurrent_layout) must read back from llama.cpp as the live one, byte for
byte. Anything else, or any mismatch, keeps whole snapshots.
"""

from ..llama.model import MemoryKind, Model
from ..llama.sequence import Sequence
from ..state import kvlayout, recurrent_layout
from ..state.row_round_trip import round_trip
from .modes import KVMode

PROBE = "chatdb layout check: one two three"


def check_layout(model: Model, warn) -> "tuple[kvlayout.Layout | None, KVMode]":
    """(layout, its KV mode) if a tiny live state round-trips, else (None, SNAPSHOT)."""
    kind = model.memory_kind()
    if kind == MemoryKind.RECURRENT or (kind == MemoryKind.HYBRID and model.n_swa):
        return None, KVMode.SNAPSHOT
    probe = model.tokenize(PROBE)
    seq = Sequence(model)
    try:
        seq.prefill(probe)
        state = seq.state()
        if kind == MemoryKind.ATTENTION:
            return round_trip(model, state, at=len(probe) // 2), KVMode.ROWS
        if kind == MemoryKind.HYBRID:
            return _verify_checkpoint(seq, state, len(probe) // 2), KVMode.CHECKPOINT
        return _verify_window(seq, state, len(probe) // 2), KVMode.WINDOW
    except kvlayout.LayoutMismatch as exc:
        warn(f"KV rows cannot be cut for this model ({exc}); storing whole snapshots")
        return None, KVMode.SNAPSHOT
    finally:
        seq.keep(0)
        seq.close()


def _verify_window(seq: Sequence, state, at: int) -> kvlayout.Layout:
    """Rebuild `state` from two segments, load it, and compare what llama.cpp writes back."""
    live = bytes(state)
    layout = kvlayout.parse(live, window=seq.model.n_swa)
    n = layout.n_cells
    segments = [kvlayout.cut(live, layout, 0, at), kvlayout.cut(live, layout, at, n)]
    _reads_back(seq, kvlayout.state_from(layout, segments, n, [at, n - at]), live)
    return layout


def _reads_back(seq: Sequence, rebuilt, live: bytes) -> None:
    """LayoutMismatch unless `rebuilt`, loaded, reads back from llama.cpp as `live`."""
    if not seq.load(rebuilt, seq.tokens):
        raise kvlayout.LayoutMismatch("llama.cpp refused the rebuilt state")
    if bytes(seq.state()) != live:
        raise kvlayout.LayoutMismatch("the rebuilt state reads back differently")


def _verify_checkpoint(seq: Sequence, state, at: int) -> kvlayout.Layout:
    """Rebuild a hybrid `state` from its attention rows and its recurrent part, load it,
    and compare what llama.cpp writes back; the layout of the attention part."""
    live = bytes(state)
    _, attention, recurrent = recurrent_layout.split_hybrid(live)
    layout = round_trip(seq.model, attention, at)
    n = layout.n_cells
    rows = kvlayout.state_from(layout, [kvlayout.cut(attention, layout, 0, at),
                                        kvlayout.cut(attention, layout, at, n)], n)
    _reads_back(seq, recurrent_layout.join_hybrid(rows, recurrent), live)
    return layout
