"""Write a tiny hybrid model (LFM2: short-convolution recurrent layers and attention layers)
with random weights, for testing how chatdb stores and restores a hybrid model's state.

No recurrent or hybrid GGUF is on the package registry; what is tested (the state
llama.cpp holds, stored and rebuilt exactly) does not depend on what the weights
mean. The tokenizer is copied from another GGUF (SmolLM2's), so prompts tokenize
and its chat template applies. The same seed gives the same file.

    python tests/assets/tiny_hybrid.py OUT.gguf [TOKENIZER.gguf (default: the default model)]
"""

import sys
from pathlib import Path

import gguf
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import gguf_fixture  # noqa: E402

ARCH = "lfm2"
N_EMBD, N_FF, N_HEAD, N_HEAD_KV, L_CACHE = 32, 64, 2, 1, 3
LAYERS = ("conv", "conv", "attn", "conv", "attn", "conv")   # the recurrent layers have no KV heads
CONTEXT = 8192


def write(out: Path, tokenizer: Path, seed: int = 0) -> Path:
    """Write the model to `out` (atomically); returns it."""
    return gguf_fixture.write(out, tokenizer, ARCH, "chatdb tiny hybrid (random weights)", _keys, _tensors, seed)


def _keys(w: gguf.GGUFWriter) -> None:
    w.add_context_length(CONTEXT)
    w.add_embedding_length(N_EMBD)
    w.add_feed_forward_length(N_FF)
    w.add_block_count(len(LAYERS))
    w.add_head_count(N_HEAD)
    w.add_head_count_kv([N_HEAD_KV if kind == "attn" else 0 for kind in LAYERS])
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_shortconv_l_cache(L_CACHE)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)


def _tensors(rng, n_vocab: int):
    """(name, array) of every tensor; numpy shapes are reversed GGUF shapes."""
    weight = gguf_fixture.weights(rng)

    def ones(n):
        return np.ones(n, np.float32)

    head_dim = N_EMBD // N_HEAD
    yield "token_embd.weight", weight(n_vocab, N_EMBD, dtype=np.float16)
    yield "token_embd_norm.weight", ones(N_EMBD)    # LFM2's final norm
    for i, kind in enumerate(LAYERS):
        b = f"blk.{i}."
        yield b + "attn_norm.weight", ones(N_EMBD)
        yield b + "ffn_norm.weight", ones(N_EMBD)
        yield b + "ffn_gate.weight", weight(N_FF, N_EMBD)
        yield b + "ffn_up.weight", weight(N_FF, N_EMBD)
        yield b + "ffn_down.weight", weight(N_EMBD, N_FF)
        if kind == "conv":
            yield b + "shortconv.conv.weight", weight(N_EMBD, L_CACHE)
            yield b + "shortconv.in_proj.weight", weight(3 * N_EMBD, N_EMBD)
            yield b + "shortconv.out_proj.weight", weight(N_EMBD, N_EMBD)
        else:
            yield b + "attn_q.weight", weight(N_EMBD, N_EMBD)
            yield b + "attn_k.weight", weight(N_HEAD_KV * head_dim, N_EMBD)
            yield b + "attn_v.weight", weight(N_HEAD_KV * head_dim, N_EMBD)
            yield b + "attn_output.weight", weight(N_EMBD, N_EMBD)
            yield b + "attn_q_norm.weight", ones(head_dim)
            yield b + "attn_k_norm.weight", ones(head_dim)


if __name__ == "__main__":
    gguf_fixture.main(write)
