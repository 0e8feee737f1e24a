"""What decoding costs on llama.cpp's CPU backend, to plan batches and drafts.

Flash attention in ggml-cpu runs a batch of 64 or more query rows as tiled
matrix products, and smaller batches row by row; a single token takes a
third path, split across threads. Attention per row and per context cell
is about ten times dearer row by row than tiled. Figures in milliseconds,
measured on SmolLM2-135M (2 cores); what matters are their ratios.
"""

TILE = 64                     # ggml-cpu GGML_FA_TILE_Q: batches this large are tiled
STEP_BASE, STEP_PER_CELL = 13.3, 0.0143      # one token (split path)
BATCH_BASE = 7.0                             # a batch of 2..63 rows: this, plus per row
ROW_BASE, ROW_PER_CELL = 5.6, 0.0114
TILED_BASE, TILED_PER_CELL = 4.1, 0.0011     # each row of a tiled batch


def step(cells: int) -> float:
    return STEP_BASE + STEP_PER_CELL * cells


def batch(rows: int, cells: int) -> float:
    if rows == 1:
        return step(cells)
    if rows >= TILE:
        return rows * (TILED_BASE + TILED_PER_CELL * cells)
    return BATCH_BASE + rows * (ROW_BASE + ROW_PER_CELL * cells)


def verify_cost(k: int, cells: int) -> float:
    """Verifying k guesses (k+1 rows), in single decode steps."""
    return batch(k + 1, cells) / step(cells)


def compute_from(restored: int, target: int) -> int:
    """Where to start computing `target` tokens when the first `restored` are held.

    A few tokens after a long context cost more row by row than a full tile
    that recomputes some of the held ones.
    """
    todo = target - restored
    if 1 < todo < TILE and target >= TILE:
        start = target - TILE
        if batch(TILE, start) < batch(todo, restored):
            return start
    return restored


def split(total: int, n_batch: int) -> list[int]:
    """Batch sizes for a prefill of `total` tokens: never a small tail after big batches."""
    sizes = [n_batch] * (total // n_batch) + ([total % n_batch] if total % n_batch else [])
    if len(sizes) > 1 and sizes[-1] < TILE:
        moved = TILE - sizes[-1]
        sizes[-2] -= moved
        sizes[-1] += moved
    return sizes
