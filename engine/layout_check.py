"""The start-up check that a model's KV can be cut into per-token rows."""

from . import kvlayout
from .decode import Decoder
from .model import Model
from .row_round_trip import round_trip

PROBE = "chatdb layout check: one two three"


def check_layout(model: Model, warn) -> "tuple[kvlayout.Layout | None, str]":
    """(layout, 'rows') if a tiny live state cuts and re-joins byte for byte, else (None, 'snapshot')."""
    if not model.cuttable_memory():
        return None, "snapshot"
    probe = model.tokenize(PROBE)
    decoder = Decoder(model)
    try:
        decoder.prefill(probe, 0)
        return round_trip(model, model.get_state(), split=len(probe) // 2), "rows"
    except kvlayout.LayoutMismatch as exc:
        warn(f"KV rows cannot be cut for this model ({exc}); storing whole snapshots")
        return None, "snapshot"
    finally:
        decoder.close()
        model.clear()
