"""What decoding costs on llama.cpp's CPU backend, to plan drafts.

On the CPU chatdb runs attention without flash attention (settings.py), as
matrix products: a batch costs a fixed part plus a share per row, and both
grow with the context. Verifying k guesses (k+1 rows) thus costs far less
than k+1 single steps. Figures in milliseconds, measured on SmolLM2-135M
(2 cores, llama.cpp built as the Makefile does); only their ratios matter.
"""

STEP_BASE, STEP_PER_CELL = 10.25, 0.00345    # one token
BATCH_BASE, BATCH_PER_CELL = 6.9, 0.00187    # a batch of 2 or more rows: this, plus per row
ROW_BASE, ROW_PER_CELL = 3.73, 0.0016


def step(cells: int) -> float:
    return STEP_BASE + STEP_PER_CELL * cells


def batch(rows: int, cells: int) -> float:
    if rows == 1:
        return step(cells)
    return BATCH_BASE + BATCH_PER_CELL * cells + rows * (ROW_BASE + ROW_PER_CELL * cells)


def verify_cost(k: int, cells: int) -> float:
    """Verifying k guesses (k+1 rows), in single decode steps."""
    return batch(k + 1, cells) / step(cells)
