"""Cutting llama.cpp's sequence state into per-token KV rows, and back.

For the plain attention cache with flash attention (V not transposed),
`llama_state_seq_get_data` writes (DESIGN.md):

    u32 magic, i32 seq_id
    u32 n_stream, u32 cell_count
    per cell: i32 pos, u32 n_seq_id, i32 seq_id[n_seq_id]
    u32 v_trans, u32 n_layer
    per layer: i32 k_type, u64 k_row_size, K rows[cell_count]
    per layer: i32 v_type, u64 v_row_size, V rows[cell_count]

A message's segment is its token range of every K and V block, laid end to
end; the state for a path is rebuilt by joining its segments block by block.
`verify` checks this against the live library once at start-up.
"""

import struct
from dataclasses import dataclass

import numpy as np

VERSION = 1  # part of every KV fingerprint: bump when cutting or joining changes

U32, I32U64 = struct.Struct("<I"), struct.Struct("<iQ")


class LayoutMismatch(Exception):
    """The state bytes are not laid out as this module expects."""


@dataclass(frozen=True)
class Block:
    type_code: int
    row_size: int
    offset: int          # where the rows start in the state bytes


@dataclass(frozen=True)
class Layout:
    header: bytes        # magic + seq_id, kept as is
    n_cells: int
    blocks: tuple        # K blocks of every layer, then V blocks

    @property
    def bytes_per_token(self) -> int:
        return sum(b.row_size for b in self.blocks)


def parse(state) -> Layout:
    buf = memoryview(state).cast("B")
    try:
        header = bytes(buf[:8])
        n_stream, n_cells = struct.unpack_from("<II", buf, 8)
        if n_stream != 1:
            raise LayoutMismatch(f"{n_stream} streams")
        cells = np.frombuffer(buf, "<i4", count=3 * n_cells, offset=16).reshape(n_cells, 3)
        if not (np.array_equal(cells[:, 0], np.arange(n_cells)) and (cells[:, 1] == 1).all()):
            raise LayoutMismatch("cells are not positions 0..n-1 of one sequence")
        off = 16 + cells.nbytes
        v_trans, n_layer = struct.unpack_from("<II", buf, off)
        off += 8
        if v_trans != 0:
            raise LayoutMismatch("V is transposed (flash attention off)")
        blocks = []
        for _ in range(2 * n_layer):
            type_code, row_size = I32U64.unpack_from(buf, off)
            off += I32U64.size
            blocks.append(Block(type_code, row_size, off))
            off += row_size * n_cells
    except (struct.error, ValueError) as exc:
        raise LayoutMismatch(f"truncated state ({exc})") from None
    if off != len(buf):
        raise LayoutMismatch(f"{len(buf) - off} unexplained bytes at the end")
    return Layout(header, n_cells, tuple(blocks))


def cut(state, layout: Layout, start: int, stop: int) -> bytes:
    """The KV rows of tokens [start, stop): every block's slice, end to end."""
    buf = np.frombuffer(state, np.uint8)
    return b"".join(
        buf[b.offset + start * b.row_size: b.offset + stop * b.row_size].tobytes()
        for b in layout.blocks)


def assemble(layout: Layout, segments: list[bytes], n_tokens: int) -> bytes:
    """The sequence state of `n_tokens` tokens from per-message segments in path order.

    `layout` gives the header and block types (from any state of this model).
    """
    sizes = [b.row_size for b in layout.blocks]
    per_token = sum(sizes)
    counts = []
    for seg in segments:
        if len(seg) % per_token:
            raise LayoutMismatch("a segment is not a whole number of token rows")
        counts.append(len(seg) // per_token)
    if sum(counts) != n_tokens:
        raise LayoutMismatch(f"segments hold {sum(counts)} tokens, expected {n_tokens}")
    cells = np.zeros((n_tokens, 3), "<i4")
    cells[:, 0] = np.arange(n_tokens)
    cells[:, 1] = 1
    parts = [layout.header, struct.pack("<II", 1, n_tokens), cells.tobytes(),
             struct.pack("<II", 0, len(layout.blocks) // 2)]
    segments = [memoryview(s).cast("B") for s in segments]
    seg_offsets = [0] * len(segments)
    for block, size in zip(layout.blocks, sizes):
        parts.append(I32U64.pack(block.type_code, size))
        for i, (seg, count) in enumerate(zip(segments, counts)):
            parts.append(seg[seg_offsets[i]: seg_offsets[i] + size * count])
            seg_offsets[i] += size * count
    return b"".join(parts)


def verify(state, split: int) -> Layout:
    """Check that cutting `state` at `split` and re-joining gives the same bytes."""
    layout = parse(state)
    first = cut(state, layout, 0, split)
    rest = cut(state, layout, split, layout.n_cells)
    if assemble(layout, [first, rest], layout.n_cells) != bytes(state):
        raise LayoutMismatch("re-assembled state differs from the original")
    return layout
