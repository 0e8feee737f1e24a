"""One message's KV segment cut at a token: its leading rows and the rest.

A segment (kvlayout.cut) holds, block by block, every token's full-attention
rows and the sliding-window rows of its last `tail` tokens. Cut at token k,
both pieces are segments of the same form (the first k tokens, with the
sliding-window rows among them; the other tokens, with theirs), so each is
placed by kvlayout.Assembly like any segment. Sibling messages whose leading
pieces are the same bytes store that piece once (row_sharing.py).
"""

import numpy as np

from .kvlayout import Layout, LayoutMismatch


def blocks_of(layout: Layout, raw, n_tokens: int) -> list:
    """Per block: (first token it holds rows of, its rows as (outer, rows, unit))."""
    seg = np.frombuffer(raw, np.uint8)
    tail = layout.tail(n_tokens, seg.size)
    out, pos = [], 0
    for b in layout.blocks:
        rows = n_tokens if b.part == 0 else tail
        out.append((n_tokens - rows, seg[pos: pos + b.per_token * rows].reshape(b.outer, rows, b.unit)))
        pos += b.per_token * rows
    if pos != seg.size:
        raise LayoutMismatch(f"a segment of {seg.size} bytes does not hold {n_tokens} tokens' rows")
    return out


def split_segment(layout: Layout, raw, n_tokens: int, k: int) -> "tuple[bytes, bytes]":
    """The segment of tokens [0, k) and that of [k, n_tokens)."""
    head, rest = [], []
    for first, rows in blocks_of(layout, raw, n_tokens):
        at = max(0, k - first)
        head.append(rows[:, :at].reshape(-1))
        rest.append(rows[:, at:].reshape(-1))
    return _joined(head), _joined(rest)


def join_pieces(layout: Layout, head, k: int, rest, n_tokens: int) -> bytes:
    """The segment of n_tokens tokens whose pieces split_segment gave at k are `head` and `rest`."""
    pieces = []
    for (_, a), (_, b) in zip(blocks_of(layout, head, k), blocks_of(layout, rest, n_tokens - k)):
        pieces.append(np.concatenate([a, b], axis=1).reshape(-1))
    return _joined(pieces)


def leading_equal(layout: Layout, a, n_a: int, b, n_b: int) -> int:
    """How many leading tokens two segments hold the same rows of, byte for byte
    (every block: the same rows, or neither holds that token's)."""
    m = min(n_a, n_b)
    same = np.ones(m, bool)
    for (first_a, rows_a), (first_b, rows_b) in zip(blocks_of(layout, a, n_a), blocks_of(layout, b, n_b)):
        if first_a != first_b:   # a token held by one and not the other differs
            same[min(first_a, first_b): max(first_a, first_b)] = False
        lo = max(first_a, first_b)
        if lo < m:
            same[lo:m] &= (rows_a[:, lo - first_a: m - first_a] == rows_b[:, lo - first_b: m - first_b]).all(axis=(0, 2))
    unequal = np.flatnonzero(~same)
    return int(unequal[0]) if len(unequal) else m


def _joined(pieces) -> bytes:
    return np.concatenate(pieces).tobytes() if pieces else b""
