"""Write a tiny llama-architecture model with random weights, SmolLM2's tokenizer and
Qwen2.5's chat template (qwen2.5_chat_template.jinja: a template with tool support), for
testing tools rendered through a model's own template behind a real `chatdb serve`.

What is tested (the prompt the template writes, calls the grammar holds to a schema, the
archive's tree and KV) does not depend on what the weights mean; the template's markers
(<|im_start|>, <|im_end|>) are SmolLM2's own tokens. The same seed gives the same file.

    python tests/assets/tiny_tools.py OUT.gguf [TOKENIZER.gguf (default: the default model)]
"""

import sys
from pathlib import Path

import gguf
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import gguf_fixture  # noqa: E402

ARCH = "llama"
N_EMBD, N_FF, N_HEAD, N_HEAD_KV, N_LAYER = 32, 64, 2, 1, 2
CONTEXT = 8192
TEMPLATE = Path(__file__).parent / "qwen2.5_chat_template.jinja"


def write(out: Path, tokenizer: Path, seed: int = 0) -> Path:
    """Write the model to `out` (atomically); returns it."""
    return gguf_fixture.write(out, tokenizer, ARCH, "chatdb tiny tools (random weights)", _keys,
                              _tensors, seed, chat_template=TEMPLATE.read_text())


def _keys(w: gguf.GGUFWriter) -> None:
    w.add_context_length(CONTEXT)
    w.add_embedding_length(N_EMBD)
    w.add_feed_forward_length(N_FF)
    w.add_block_count(N_LAYER)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)


def _tensors(rng, n_vocab: int):
    """(name, array) of every tensor; numpy shapes are reversed GGUF shapes."""
    weight = gguf_fixture.weights(rng)
    norm = np.ones(N_EMBD, np.float32)
    head_dim = N_EMBD // N_HEAD
    yield "token_embd.weight", weight(n_vocab, N_EMBD, dtype=np.float16)
    yield "output_norm.weight", norm
    for i in range(N_LAYER):
        b = f"blk.{i}."
        yield b + "attn_norm.weight", norm
        yield b + "ffn_norm.weight", norm
        yield b + "attn_q.weight", weight(N_EMBD, N_EMBD)
        yield b + "attn_k.weight", weight(N_HEAD_KV * head_dim, N_EMBD)
        yield b + "attn_v.weight", weight(N_HEAD_KV * head_dim, N_EMBD)
        yield b + "attn_output.weight", weight(N_EMBD, N_EMBD)
        yield b + "ffn_gate.weight", weight(N_FF, N_EMBD)
        yield b + "ffn_up.weight", weight(N_FF, N_EMBD)
        yield b + "ffn_down.weight", weight(N_EMBD, N_FF)


if __name__ == "__main__":
    gguf_fixture.main(write)
