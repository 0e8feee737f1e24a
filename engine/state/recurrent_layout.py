"""A hybrid model's sequence state: attention rows, then a recurrent state of fixed size.

For a hybrid memory (`llama_memory_hybrid`, src/llama-memory-hybrid.cpp of the
llama.cpp that llama-cpp-python 0.3.36 vendors) `llama_state_seq_get_data`
writes the attention cache's part exactly as a plain model's (kvlayout), then
the recurrent memory's (`llama_memory_recurrent::state_write`):

    u32 cell_count (1: a sequence has one recurrent cell; 0 when empty)
    per cell: i32 pos (the last position it has seen), u32 n_seq_id (0)
    u32 s_trans (0), u32 n_layer
    per recurrent layer: i32 r_type, u64 r_row_size, R row (e.g. the conv window)
    per recurrent layer: i32 s_type, u64 s_row_size, S row (e.g. the SSM state)

The recurrent part does not grow with the tokens and cannot be cut by token:
it is kept whole at a message's end (a checkpoint), and the state for a point
is the attention rows of every token before it followed by the checkpoint
taken there. The position in the checkpoint says where it was taken.
"""

import struct

import numpy as np

from . import kvlayout

CELL = struct.Struct("<Iii")   # cell_count, pos, n_seq_id


def split_hybrid(state) -> "tuple[kvlayout.Layout, memoryview, memoryview]":
    """(layout of the attention part, the attention part as a plain state, the recurrent part)."""
    view = memoryview(state).cast("B")
    layout = kvlayout.parse(view, trailing=True)
    if not layout.blocks:
        raise kvlayout.LayoutMismatch("a hybrid state without attention layers")
    end = layout.end
    recurrent = view[end:]
    position = checkpoint_position(recurrent)
    if position != layout.n_cells - 1:
        raise kvlayout.LayoutMismatch(f"the recurrent state is at position {position}, "
                                      f"the attention cells end at {layout.n_cells - 1}")
    return layout, view[:end], recurrent


def checkpoint_position(recurrent) -> int:
    """The last position a recurrent part has seen (-1: it holds none)."""
    buf = memoryview(recurrent).cast("B")
    if len(buf) < 4:
        raise kvlayout.LayoutMismatch("truncated recurrent state")
    (count,) = struct.unpack_from("<I", buf, 0)
    if count == 0:
        return -1
    if count != 1 or len(buf) < CELL.size:
        raise kvlayout.LayoutMismatch(f"{count} recurrent cells for one sequence")
    _, pos, n_seq_id = CELL.unpack_from(buf, 0)
    if n_seq_id != 0:
        raise kvlayout.LayoutMismatch("a recurrent cell names its sequences")
    return pos


def join_hybrid(attention: np.ndarray, recurrent) -> np.ndarray:
    """The whole state: rebuilt attention part, then a checkpoint's bytes."""
    return np.concatenate([np.asarray(attention, np.uint8).reshape(-1),
                           np.frombuffer(recurrent, np.uint8)])
