"""Write a tiny purely recurrent model (Mamba) with random weights, for testing how
chatdb stores and restores a recurrent model's state (bounded whole-state checkpoints).

As for tiny_hybrid.py: no recurrent GGUF is on the package registry, and what is
tested (the state llama.cpp holds, stored and rebuilt exactly) does not depend on
what the weights mean. The tokenizer (and chat template) is copied from another
GGUF (SmolLM2's). The same seed gives the same file.

    python tests/assets/tiny_mamba.py OUT.gguf [TOKENIZER.gguf (default: the default model)]
"""

import sys
from pathlib import Path

import gguf
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import gguf_fixture  # noqa: E402

ARCH = "mamba"
N_EMBD, N_LAYER, D_INNER, D_STATE, D_CONV, DT_RANK = 32, 3, 64, 8, 4, 4
CONTEXT = 8192


def write(out: Path, tokenizer: Path, seed: int = 0) -> Path:
    """Write the model to `out` (atomically); returns it."""
    return gguf_fixture.write(out, tokenizer, ARCH, "chatdb tiny mamba (random weights)", _keys, _tensors, seed)


def _keys(w: gguf.GGUFWriter) -> None:
    w.add_context_length(CONTEXT)
    w.add_embedding_length(N_EMBD)
    w.add_feed_forward_length(0)
    w.add_block_count(N_LAYER)
    w.add_head_count(0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_ssm_conv_kernel(D_CONV)
    w.add_ssm_inner_size(D_INNER)
    w.add_ssm_state_size(D_STATE)
    w.add_ssm_time_step_rank(DT_RANK)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)


def _tensors(rng, n_vocab: int):
    """(name, array) of every tensor; numpy shapes are reversed GGUF shapes."""
    weight = gguf_fixture.weights(rng)

    yield "token_embd.weight", weight(n_vocab, N_EMBD, dtype=np.float16)
    yield "output_norm.weight", np.ones(N_EMBD, np.float32)
    for i in range(N_LAYER):
        b = f"blk.{i}."
        yield b + "attn_norm.weight", np.ones(N_EMBD, np.float32)
        yield b + "ssm_in.weight", weight(2 * D_INNER, N_EMBD)
        yield b + "ssm_conv1d.weight", weight(D_INNER, D_CONV)
        yield b + "ssm_conv1d.bias", np.zeros(D_INNER, np.float32)
        yield b + "ssm_x.weight", weight(DT_RANK + 2 * D_STATE, D_INNER)
        yield b + "ssm_dt.weight", weight(D_INNER, DT_RANK)
        yield b + "ssm_dt.bias", np.full(D_INNER, -2.0, np.float32)
        # A = -exp(A_log): negative, so the state decays
        yield b + "ssm_a", -np.exp(rng.uniform(0, 2, (D_INNER, D_STATE))).astype(np.float32)
        yield b + "ssm_d", np.ones(D_INNER, np.float32)
        yield b + "ssm_out.weight", weight(N_EMBD, D_INNER)


if __name__ == "__main__":
    gguf_fixture.main(write)
