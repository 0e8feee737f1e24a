"""The start-up round trip of KV rows through the path a restore takes.

A tiny live state is cut into two segments, each encoded as the writer
stores it (byte planes, zstd, checksum), then decoded and placed by the
decoder pool as ArchiveRows restores segments. Only if that gives back the
state byte for byte are rows stored for this model.
"""

from chatdb import kv

from . import kvlayout
from .archive_rows import plane_width
from .model import Model
from .segment_assembly import SegmentFault, assemble


def round_trip(model: Model, state, split: int) -> kvlayout.Layout:
    """The layout of `state`, if its rows cut at `split` come back whole; else LayoutMismatch."""
    layout = kvlayout.parse(state)
    bounds = [(0, split), (split, layout.n_cells)]
    segments = [_stored(i, kvlayout.cut(state, layout, start, stop), stop - start, plane_width(model))
                for i, (start, stop) in enumerate(bounds)]
    refs = [kv.SegmentRef(s.message_id, s.n_tokens) for s in segments]
    try:
        rebuilt = assemble(layout, refs, lambda ref: segments[ref.message_id].planes)
    except SegmentFault as fault:
        raise kvlayout.LayoutMismatch(str(fault)) from None
    if rebuilt.tobytes() != bytes(state):
        raise kvlayout.LayoutMismatch("rows stored and restored differ from the state")
    return layout


def _stored(message_id: int, raw: bytes, n_tokens: int, width: int) -> kv.Segment:
    """A segment as the archive would give it back."""
    encoded = kv.encode(raw, width)
    return kv.Segment(message_id, "rows", n_tokens, encoded.codec, encoded.raw_size,
                      encoded.checksum, encoded.blob)
