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

Interleaved sliding-window models (llama.cpp's iSWA cache) write two such
parts after the magic: the full-attention layers' cache (every position
0..n-1), then the sliding-window layers' cache, of which llama.cpp writes
only the last `window` (n_swa) positions: older cells are masked for every
later token. With the full-size sliding-window cache (`swa_full`) those come
in position order. A message's segment keeps every token's full-attention
rows and the sliding-window rows of its last tokens (at most a window, as
far back as the state it is cut from holds them): what a restore at its end,
or at any later message, needs. A state is rebuilt with the sliding-window
cache holding all n positions, as the live cache does; rows no segment holds
are older than every later token's window and are zeros (a masked cell adds
exactly nothing to attention), so what is computed next is bit for bit what
the live context computes.
"""

import struct
from dataclasses import dataclass

import llama_cpp
import numpy as np

VERSION = 2  # part of every KV fingerprint: bump when cutting or joining changes

ROWS_HEAD, TRANS_HEAD = struct.Struct("<iQ"), struct.Struct("<iII")
PAIR = struct.Struct("<II")


def plane_width(model) -> int:
    """Bytes per value split into planes when rows are compressed: f16 values as two
    planes (low and high bytes), which compress better; other types whole."""
    return 2 if model.config.type_k == llama_cpp.GGML_TYPE_F16 else 1


class LayoutMismatch(Exception):
    """The state bytes are not laid out as this module expects."""


@dataclass(frozen=True)
class Block:
    head: bytes          # the block's own header, written back as is
    outer: int           # 1 for rows, n_embd_v for transposed V
    unit: int            # bytes per cell in each run
    offset: int          # where the data starts in the state bytes
    part: int = 0        # 0: full attention (every token's rows); 1: sliding window

    @property
    def per_token(self) -> int:
        return self.outer * self.unit

    def runs(self, buf: np.ndarray, offset: int, n_cells: int) -> np.ndarray:
        """The block's data at `offset` of `buf`, one run per row: (outer, n_cells * unit)."""
        return buf[offset: offset + self.per_token * n_cells].reshape(self.outer, n_cells * self.unit)


@dataclass(frozen=True)
class Layout:
    header: bytes        # magic + seq_id, kept as is
    n_cells: int         # positions the state holds (0..n_cells-1)
    v_trans: int
    blocks: tuple        # per part: K blocks of every layer, then V blocks
    n_layers: tuple = ()            # layers of each part (plain: one)
    window: "int | None" = None     # sliding-window size (iSWA), else None
    window_first: int = 0           # first position of the sliding-window cells in this state

    @property
    def end(self) -> int:
        """Where the last block ends in the state bytes (a state with layers)."""
        last = self.blocks[-1]
        return last.offset + last.per_token * (self.n_cells - (self.window_first if last.part else 0))

    def part_bytes(self, part: int) -> int:
        return sum(b.per_token for b in self.blocks if b.part == part)

    @property
    def bytes_per_token(self) -> int:
        """Bytes one token takes in a state holding every layer's row for it."""
        return sum(b.per_token for b in self.blocks)

    @property
    def row_bytes_per_token(self) -> int:
        """Bytes kept for every token (the full-attention layers)."""
        return self.part_bytes(0)

    def tail(self, n_tokens: int, size: int) -> int:
        """Sliding-window rows in a segment of `n_tokens` tokens and `size` bytes."""
        extra = size - n_tokens * self.row_bytes_per_token
        per = self.part_bytes(1)
        t, rest = divmod(extra, per) if per else (0, extra)
        if rest or t < 0 or t > n_tokens or (self.window is not None and t > self.window):
            raise LayoutMismatch(f"a segment of {size} bytes does not hold {n_tokens} tokens' rows")
        return t

    def state_size(self, n_tokens: int) -> int:
        parts = max(1, len(self.n_layers))
        return (len(self.header) + parts * (16 + 12 * n_tokens)
                + sum(len(b.head) for b in self.blocks) + self.bytes_per_token * n_tokens)


def parse(state, window: "int | None" = None, trailing: bool = False) -> Layout:
    """The layout of a plain state (one part), or with `window` of an iSWA state (two parts);
    `trailing`: other bytes may follow the parts (a hybrid's recurrent state)."""
    buf = memoryview(state).cast("B")
    try:
        off, blocks, n_layers, cells = 8, [], [], []
        for part in range(1 if window is None else 2):
            first, n, v_trans, n_layer, off = _part_head(buf, off)
            cells.append((first, n))
            n_layers.append(n_layer)
            for i in range(2 * n_layer):
                block = _block(buf, off, transposed=v_trans == 1 and i >= n_layer, part=part)
                blocks.append(block)
                off = block.offset + block.per_token * n
    except (struct.error, ValueError) as exc:
        raise LayoutMismatch(f"truncated state ({exc})") from None
    if off != len(buf) and not trailing:
        raise LayoutMismatch(f"{len(buf) - off} unexplained bytes at the end")
    n_cells = cells[0][1]
    if cells[0][0] != 0:
        raise LayoutMismatch("the full-attention cells do not start at position 0")
    if window is not None and cells[1] != (n_cells - min(n_cells, window), min(n_cells, window)):
        raise LayoutMismatch(f"the sliding-window cells are positions {cells[1][0]}.. "
                             f"({cells[1][1]} of them), not the last {window} of {n_cells}")
    return Layout(bytes(buf[:8]), n_cells, v_trans, tuple(blocks), tuple(n_layers), window,
                  cells[-1][0])


def _part_head(buf, off: int):
    """One cache's cells and layer count: (first position, cells, v_trans, n_layer, offset after)."""
    n_stream, n_cells = PAIR.unpack_from(buf, off)
    if n_stream != 1:
        raise LayoutMismatch(f"{n_stream} streams")
    cells = np.frombuffer(buf, "<i4", count=3 * n_cells, offset=off + 8).reshape(n_cells, 3)
    first = int(cells[0, 0]) if n_cells else 0
    if not (np.array_equal(cells[:, 0], np.arange(first, first + n_cells)) and (cells[:, 1] == 1).all()):
        raise LayoutMismatch("cells are not consecutive positions of one sequence")
    off += 8 + cells.nbytes
    v_trans, n_layer = PAIR.unpack_from(buf, off)
    if v_trans not in (0, 1):
        raise LayoutMismatch(f"unknown V layout {v_trans}")
    return first, n_cells, v_trans, n_layer, off + 8


def _block(buf, off: int, transposed: bool, part: int) -> Block:
    if transposed:
        _, size_el, n_embd = TRANS_HEAD.unpack_from(buf, off)
        return Block(bytes(buf[off: off + TRANS_HEAD.size]), n_embd, size_el, off + TRANS_HEAD.size, part)
    _, row_size = ROWS_HEAD.unpack_from(buf, off)
    return Block(bytes(buf[off: off + ROWS_HEAD.size]), 1, row_size, off + ROWS_HEAD.size, part)


def cut(state, layout: Layout, start: int, stop: int) -> bytes:
    """The KV of tokens [start, stop): every full-attention row, and the
    sliding-window rows of its last tokens that the state holds (at most a window)."""
    buf = np.frombuffer(state, np.uint8)
    lo = max(start, stop - (layout.window or 0), layout.window_first) if layout.window else start
    lo = min(lo, stop)
    pieces = []
    for b in layout.blocks:
        first, n = (0, layout.n_cells) if b.part == 0 else (layout.window_first, layout.n_cells - layout.window_first)
        begin = start if b.part == 0 else lo
        runs = b.runs(buf, b.offset, n)
        pieces.append(runs[:, (begin - first) * b.unit: (stop - first) * b.unit].reshape(-1))
    return np.concatenate(pieces).tobytes() if pieces else b""


def unheld(layout: Layout, spans: "list[tuple[int, int]]") -> "list[tuple[int, int]]":
    """Token ranges whose sliding-window rows no segment holds, for segments of
    (tokens, window rows) in path order."""
    gaps, end = [], 0
    for n, t in spans:
        if end + n - t > end:
            gaps.append((end, end + n - t))
        end += n
    return gaps


class Assembly:
    """A state of `n_tokens` tokens being rebuilt in one buffer, segment by segment.

    `place` may run from several threads at once: each writes its own tokens.
    `layout` gives the header and block types (from any state of this model).
    With a window, `spans` gives each segment's (tokens, sliding-window rows)
    in path order; sliding-window rows none of them holds are zeroed here.
    """

    def __init__(self, layout: Layout, n_tokens: int, spans: "list[tuple[int, int]] | None" = None):
        self.layout, self.n_tokens = layout, n_tokens
        # Not zeroed: every byte is written below or by place (the pages fault in
        # the placing threads, not all here).
        self.buffer = buf = np.empty(layout.state_size(n_tokens), np.uint8)
        cells = np.zeros((n_tokens, 3), "<i4")
        cells[:, 0] = np.arange(n_tokens)
        cells[:, 1] = 1
        self.runs, off, blocks = [], len(layout.header), list(layout.blocks)
        buf[:off] = np.frombuffer(layout.header, np.uint8)
        for n_layer in layout.n_layers or (len(blocks) // 2,):
            head = b"".join([PAIR.pack(1, n_tokens), cells.tobytes(), PAIR.pack(layout.v_trans, n_layer)])
            buf[off: off + len(head)] = np.frombuffer(head, np.uint8)
            off += len(head)
            for b in blocks[: 2 * n_layer]:
                buf[off: off + len(b.head)] = np.frombuffer(b.head, np.uint8)
                off += len(b.head)
                self.runs.append(b.runs(buf, off, n_tokens))
                off += b.per_token * n_tokens
            blocks = blocks[2 * n_layer:]
        if layout.window is not None:
            self._zero(unheld(layout, spans if spans is not None else [(n_tokens, n_tokens)]))

    def _zero(self, gaps) -> None:
        for b, runs in zip(self.layout.blocks, self.runs):
            if b.part == 1:
                for lo, hi in gaps:
                    runs[:, lo * b.unit: hi * b.unit] = 0

    def _spans(self, size: int, first: int, count: "int | None"):
        """Per block: (block, its runs, first row placed, rows placed); and the token count."""
        layout = self.layout
        if count is None:  # plain rows: the size says how many tokens
            count, rest = divmod(size, layout.bytes_per_token) if layout.bytes_per_token else (0, size)
            if rest or layout.window is not None:
                raise LayoutMismatch("a segment is not a whole number of token rows")
        tail = layout.tail(count, size)
        if first + count > self.n_tokens:
            raise LayoutMismatch(f"segments hold more than {self.n_tokens} tokens")
        spans = [(b, runs, first if b.part == 0 else first + count - tail, count if b.part == 0 else tail)
                 for b, runs in zip(layout.blocks, self.runs)]
        return spans, count

    def place(self, segment, first: int, count: "int | None" = None) -> int:
        """Copy one segment's KV to tokens first..; returns its token count."""
        seg = np.frombuffer(segment, np.uint8)
        spans, count = self._spans(seg.size, first, count)
        pos = 0
        for b, runs, lo, rows in spans:
            runs[:, lo * b.unit: (lo + rows) * b.unit] = \
                seg[pos: pos + b.per_token * rows].reshape(b.outer, -1)
            pos += b.per_token * rows
        return count

    def place_planes(self, planes: np.ndarray, first: int, count: "int | None" = None) -> int:
        """Like place, for a segment given as byte planes (kvcodec): interleaved as it is copied."""
        if len(planes) == 1:
            return self.place(planes[0], first, count)
        if len(planes) != 2 or any(b.unit % 2 for b in self.layout.blocks):
            return self.place(np.ascontiguousarray(planes.T).reshape(-1), first, count)
        low, high = planes
        spans, count = self._spans(2 * low.size, first, count)
        pos = 0
        for b, runs, lo, rows in spans:
            values = runs[:, lo * b.unit: (lo + rows) * b.unit].view("<u2")
            n = b.per_token * rows // 2
            np.left_shift(high[pos: pos + n].reshape(b.outer, -1), 8, out=values, dtype="<u2")
            np.bitwise_or(values, low[pos: pos + n].reshape(b.outer, -1), out=values)
            pos += n
        return count


def state_from(layout: Layout, segments: list, n_tokens: int,
             counts: "list[int] | None" = None) -> np.ndarray:
    """The sequence state of `n_tokens` tokens from per-message segments in path order
    (with a window, `counts` gives each segment's tokens)."""
    spans = ([(n, layout.tail(n, len(s))) for n, s in zip(counts, segments)]
             if counts is not None else None)
    assembly, first = Assembly(layout, n_tokens, spans), 0
    for i, segment in enumerate(segments):
        first += assembly.place(segment, first, counts[i] if counts is not None else None)
    if first != n_tokens:
        raise LayoutMismatch(f"segments hold {first} tokens, expected {n_tokens}")
    return assembly.buffer


def widen(state, layout: Layout) -> np.ndarray:
    """llama.cpp's state of an iSWA cache (the window's cells) as a restore state
    whose sliding-window cache holds every position, as the live one does."""
    n = layout.n_cells
    return state_from(layout, [cut(state, layout, 0, n)], n, [n])
