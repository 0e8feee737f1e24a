"""The start-up round trip of KV rows through the path a restore takes.

A tiny live state is cut into two segments, the second beginning with a
run of rows shared as siblings share theirs (row_sharing.py), each encoded
as the writer stores it (byte planes, zstd, checksum), then decoded and
placed by the decoder pool as ArchiveRows restores segments. Only if that
gives back the state byte for byte are rows stored for this model.
"""

from chatdb.kv.store import Segment, SegmentRef, encode

from ..llama.model import Model
from . import kvlayout
from .kvlayout import plane_width
from .segment_assembly import SegmentFault, assemble
from .segment_split import split_segment


def round_trip(model: Model, state, at: int) -> kvlayout.Layout:
    """The layout of `state`, if its rows cut at token `at` come back whole; else LayoutMismatch."""
    layout = kvlayout.parse(state)
    width, n_second = plane_width(model), layout.n_cells - at
    second = kvlayout.cut(state, layout, at, layout.n_cells)
    n_shared = n_second // 2
    shared, rest = split_segment(layout, second, n_second, n_shared)
    segments = [_stored(0, kvlayout.cut(state, layout, 0, at), at, width),
                _stored(1, rest, n_second - n_shared, width), _stored(2, shared, n_shared, width)]
    refs = [SegmentRef(0, at), SegmentRef(1, n_second, len(second), 2, n_shared)]
    try:
        rebuilt = assemble(layout, refs, lambda ref: segments[ref.message_id].planes,
                           lambda ref: segments[ref.shared_id].planes)
    except SegmentFault as fault:
        raise kvlayout.LayoutMismatch(str(fault)) from None
    if rebuilt.tobytes() != bytes(state):
        raise kvlayout.LayoutMismatch("rows stored and restored differ from the state")
    return layout


def _stored(message_id: int, raw: bytes, n_tokens: int, width: int) -> Segment:
    """A segment as the archive would give it back."""
    encoded = encode(raw, width)
    return Segment(message_id, "rows", n_tokens, encoded.codec, encoded.raw_size,
                      encoded.checksum, encoded.blob)
