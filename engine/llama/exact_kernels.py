"""CPU matrix kernels that compute a token the same whatever else is in its batch.

Speculative decoding checks guesses in a batch and keeps a guess only where
the model samples it there, and a resumed chat reads its missing tokens in
one batch where the live one read them one at a time: both give the answer
of plain decoding only if a token's logits do not depend on the batch it is
computed in. Two paths of llama.cpp's CPU backend break that, besides the
llamafile kernels the Makefile leaves out of the build:

- weights repacked into interleaved blocks when the model loads (Q4_0, Q4_K,
  IQ4_NL, ...; llama.cpp's "extra buffer types"): a batch's rows go four at a
  time through one kernel and the rest through another, which sum in another
  order;
- a tiled matrix product for K-quant weights (Q3_K to Q6_K), taken for
  batches of 8 rows and more.

With them, Gemma 3 270M (Q4_K_M) gave logits up to 2.4 apart for the same
token stepped alone and checked in a batch of five, enough to flip a near-tie:
drafted answers parted from plain ones. Without them every batch size gives
the same bits (tests/engine/test_exact_kernels.py). Decoding is as fast; a long
prompt of such a model took a few percent longer to read on two cores
(bench/exact_kernels.py).
Models whose weights neither path takes (SmolLM2's Q4_1, Q8_0) are unaffected.

CHATDB_EXACT_KERNELS=off keeps llama.cpp's own choice (faster prompts, answers
that may part at a near-tie); KV computed so is kept apart from the exact
kernels' (`fingerprint_fields`).
"""

import os

from ..errors import EngineError

ENV = "CHATDB_EXACT_KERNELS"
# llama.cpp's switch for the tiled path, read once per process at its first matrix product.
TILED_ENV = "GGML_CPU_TILED_MM"


def wanted() -> bool:
    """Whether the exact kernels are asked for ($CHATDB_EXACT_KERNELS: on, the default, or off)."""
    value = os.environ.get(ENV, "on").strip().lower()
    if value not in ("on", "off"):
        raise EngineError(f"{ENV} must be on or off, not {value!r}")
    return value == "on"


def apply(mparams) -> None:
    """Set a model's load parameters (llama_model_params, its n_gpu_layers set) for the exact
    kernels where they are wanted; called before any model of the process computes, as
    llama.cpp reads its switch for the tiled path once.

    Only for a model wholly on the CPU: with layers on a GPU, the device's kernels choose
    their own order of sums by batch size (docs/gpu.md), so the CPU's exact ones would buy
    nothing there, and a GPU build loads its weights as llama.cpp plans them."""
    if mparams.n_gpu_layers != 0 or not wanted():
        return
    mparams.use_extra_bufts = False
    os.environ.setdefault(TILED_ENV, "0")   # a value the user set is theirs


def fingerprint_fields(n_gpu_layers: int) -> dict:
    """What the KV fingerprint adds for the kernels a model loaded with `n_gpu_layers` on a
    GPU computes with, so that KV llama.cpp's own kernels computed is not restored where the
    exact ones compute, or the other way round. Nothing for the exact ones, the default, so
    that KV stored before keeps its fingerprint (for models the two paths above take, its
    sums were theirs: the same tokens, a hair apart in value, as a chat read in one batch
    always was from one read step by step); nothing with layers on a GPU, where `apply`
    changes nothing."""
    return {"kernels": "llama.cpp"} if n_gpu_layers == 0 and not wanted() else {}
