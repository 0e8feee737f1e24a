"""The prior cost model for llama.cpp's CPU backend, before this machine's timings are known.

On the CPU chatdb runs attention without flash attention (offload_plan.py), as
matrix products: a batch costs a fixed part plus a share per row, and both
grow with the context, so verifying k guesses (k+1 rows) costs far less than
k+1 single steps. These coefficients (milliseconds, SmolLM2-135M on a 2-core
Xeon) give only the shape: the engine measures its own (calibrate.py) and
fits them to the timings, scaling this prior where the timings say nothing.
"""

from .cost_model import CostModel

PRIOR = CostModel(step_coef=(10.25, 0.00345), batch_coef=(6.9, 0.00187, 3.73, 0.0016))
GPU_PRIOR = CostModel()   # a step costs 1; each extra verified row 5% of one


def verify_cost(k: int, cells: int) -> float:
    return PRIOR.verify_cost(k, cells)
