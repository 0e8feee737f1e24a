"""Cutting llama.cpp's sequence state into per-token KV rows, and back.

For the plain attention cache (`llama_kv_cache`, src/llama-kv-cache.cpp of the
llama.cpp that llama-cpp-python 0.3.36 vendors) `llama_state_seq_get_data` writes:

    u32 magic, i32 seq_id
    u32 n_stream, u32 cell_count
    per cell: i32 pos, u32 n_seq_id, i32 seq_id[n_seq_id]
    u32 v_trans, u32 n_layer
    per layer: i32 k_type, u64 k_row_size, K rows[cell_count]
    per layer, V as rows (v_trans 0, flash attention on):
        i32 v_type, u64 v_row_size, V rows[cell_count]
    or V transposed (v_trans 1, flash attention off):
        i32 v_type, u32 v_size_el, u32 n_embd_v, then per dimension the
        elements of every cell[cell_count]

Every block is thus `outer` runs of `unit` bytes per cell: one run of rows,
or one run per V dimension. A message's segment is its token range of every
run of every block, laid end to end; the state for a path is rebuilt by
placing each segment's ranges back, block by block. `verify` checks this
against the live library once at start-up.
"""

import struct
from dataclasses import dataclass

import numpy as np

VERSION = 2  # part of every KV fingerprint: bump when cutting or joining changes

ROWS_HEAD, TRANS_HEAD = struct.Struct("<iQ"), struct.Struct("<iII")


class LayoutMismatch(Exception):
    """The state bytes are not laid out as this module expects."""


@dataclass(frozen=True)
class Block:
    head: bytes          # the block's own header, written back as is
    outer: int           # 1 for rows, n_embd_v for transposed V
    unit: int            # bytes per cell in each run
    offset: int          # where the data starts in the state bytes

    @property
    def per_token(self) -> int:
        return self.outer * self.unit

    def runs(self, buf: np.ndarray, offset: int, n_cells: int) -> np.ndarray:
        """The block's data at `offset` of `buf`, one run per row: (outer, n_cells * unit)."""
        return buf[offset: offset + self.per_token * n_cells].reshape(self.outer, n_cells * self.unit)


@dataclass(frozen=True)
class Layout:
    header: bytes        # magic + seq_id, kept as is
    n_cells: int
    v_trans: int
    blocks: tuple        # K blocks of every layer, then V blocks

    @property
    def bytes_per_token(self) -> int:
        return sum(b.per_token for b in self.blocks)

    def state_size(self, n_tokens: int) -> int:
        return (len(self.header) + 8 + 12 * n_tokens + 8
                + sum(len(b.head) for b in self.blocks) + self.bytes_per_token * n_tokens)


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
        if v_trans not in (0, 1):
            raise LayoutMismatch(f"unknown V layout {v_trans}")
        off += 8
        blocks = []
        for i in range(2 * n_layer):
            block = _block(buf, off, transposed=v_trans == 1 and i >= n_layer)
            blocks.append(block)
            off = block.offset + block.per_token * n_cells
    except (struct.error, ValueError) as exc:
        raise LayoutMismatch(f"truncated state ({exc})") from None
    if off != len(buf):
        raise LayoutMismatch(f"{len(buf) - off} unexplained bytes at the end")
    return Layout(header, n_cells, v_trans, tuple(blocks))


def _block(buf, off: int, transposed: bool) -> Block:
    if transposed:
        _, size_el, n_embd = TRANS_HEAD.unpack_from(buf, off)
        return Block(bytes(buf[off: off + TRANS_HEAD.size]), n_embd, size_el, off + TRANS_HEAD.size)
    _, row_size = ROWS_HEAD.unpack_from(buf, off)
    return Block(bytes(buf[off: off + ROWS_HEAD.size]), 1, row_size, off + ROWS_HEAD.size)


def cut(state, layout: Layout, start: int, stop: int) -> bytes:
    """The KV of tokens [start, stop): every block's ranges, end to end."""
    buf = np.frombuffer(state, np.uint8)
    count = stop - start
    out = np.empty(layout.bytes_per_token * count, np.uint8)
    pos = 0
    for b in layout.blocks:
        runs = b.runs(buf, b.offset, layout.n_cells)
        out[pos: pos + b.per_token * count].reshape(b.outer, -1)[:] = \
            runs[:, start * b.unit: stop * b.unit]
        pos += b.per_token * count
    return out.tobytes()


class Assembly:
    """A state of `n_tokens` tokens being rebuilt in one buffer, segment by segment.

    `place` may run from several threads at once: each writes its own tokens.
    `layout` gives the header and block types (from any state of this model).
    """

    def __init__(self, layout: Layout, n_tokens: int):
        self.layout, self.n_tokens = layout, n_tokens
        # Not zeroed: every byte is written below or by place (the pages fault in
        # the placing threads, not all here).
        self.buffer = buf = np.empty(layout.state_size(n_tokens), np.uint8)
        cells = np.zeros((n_tokens, 3), "<i4")
        cells[:, 0] = np.arange(n_tokens)
        cells[:, 1] = 1
        head = b"".join([layout.header, struct.pack("<II", 1, n_tokens), cells.tobytes(),
                         struct.pack("<II", layout.v_trans, len(layout.blocks) // 2)])
        buf[:len(head)] = np.frombuffer(head, np.uint8)
        self.runs, off = [], len(head)
        for b in layout.blocks:
            buf[off: off + len(b.head)] = np.frombuffer(b.head, np.uint8)
            off += len(b.head)
            self.runs.append(b.runs(buf, off, n_tokens))
            off += b.per_token * n_tokens

    def place(self, segment, first: int) -> int:
        """Copy one segment's KV to tokens first..; returns its token count."""
        seg = np.frombuffer(segment, np.uint8)
        count = self._count(seg.size, first)
        pos = 0
        for b, runs in zip(self.layout.blocks, self.runs):
            runs[:, first * b.unit: (first + count) * b.unit] = \
                seg[pos: pos + b.per_token * count].reshape(b.outer, -1)
            pos += b.per_token * count
        return count

    def place_planes(self, planes: np.ndarray, first: int) -> int:
        """Like place, for a segment given as byte planes (kvcodec): interleaved as it is copied."""
        if len(planes) == 1:
            return self.place(planes[0], first)
        if len(planes) != 2 or any(b.unit % 2 for b in self.layout.blocks):
            return self.place(np.ascontiguousarray(planes.T).reshape(-1), first)
        low, high = planes
        count = self._count(2 * low.size, first)
        pos = 0
        for b, runs in zip(self.layout.blocks, self.runs):
            values = runs[:, first * b.unit: (first + count) * b.unit].view("<u2")
            n = b.per_token * count // 2
            np.left_shift(high[pos: pos + n].reshape(b.outer, -1), 8, out=values, dtype="<u2")
            np.bitwise_or(values, low[pos: pos + n].reshape(b.outer, -1), out=values)
            pos += n
        return count

    def _count(self, size: int, first: int) -> int:
        """Tokens in a segment of `size` bytes placed at `first`, checked to fit."""
        per_token = self.layout.bytes_per_token
        if size % per_token:
            raise LayoutMismatch("a segment is not a whole number of token rows")
        count = size // per_token
        if first + count > self.n_tokens:
            raise LayoutMismatch(f"segments hold more than {self.n_tokens} tokens")
        return count


def assemble(layout: Layout, segments: list, n_tokens: int) -> np.ndarray:
    """The sequence state of `n_tokens` tokens from per-message segments in path order."""
    assembly, first = Assembly(layout, n_tokens), 0
    for segment in segments:
        first += assembly.place(segment, first)
    if first != n_tokens:
        raise LayoutMismatch(f"segments hold {first} tokens, expected {n_tokens}")
    return assembly.buffer


def verify(state, split: int) -> Layout:
    """Check that cutting `state` at `split` and re-joining gives the same bytes."""
    layout = parse(state)
    first = cut(state, layout, 0, split)
    rest = cut(state, layout, split, layout.n_cells)
    if assemble(layout, [first, rest], layout.n_cells).tobytes() != bytes(state):
        raise LayoutMismatch("re-assembled state differs from the original")
    return layout
