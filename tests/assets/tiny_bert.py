"""A tiny sentence-transformers BERT folder with random weights (fixed seed), for the converter.

    write(folder) -> folder     # config.json, tokenizer.json, 1_Pooling/, model.safetensors

Small enough to compute in numpy in milliseconds, shaped as all-MiniLM is
(a WordPiece vocabulary with ## continuations, mean pooling), so converting
it exercises every tensor name and vocabulary rule the real model needs.
"""

import json
import struct
from pathlib import Path

import numpy as np

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["hello", "world", "##s", ",", "!", "run", "##ning", "the", "cat", "sat", "on", "mat",
         "token", "##izer", "a", "b"]
CONFIG = {"architectures": ["BertModel"], "model_type": "bert", "hidden_size": 32,
          "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
          "max_position_embeddings": 64, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
          "vocab_size": len(SPECIAL) + len(WORDS), "hidden_act": "gelu"}


def tensors(seed: int = 22) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    c = CONFIG
    h, f = c["hidden_size"], c["intermediate_size"]
    w = lambda *shape: (rng.standard_normal(shape) * 0.2).astype(np.float32)
    out = {"embeddings.word_embeddings.weight": w(c["vocab_size"], h),
           "embeddings.position_embeddings.weight": w(c["max_position_embeddings"], h),
           "embeddings.token_type_embeddings.weight": w(2, h),
           "embeddings.LayerNorm.weight": 1 + w(h), "embeddings.LayerNorm.bias": w(h),
           "embeddings.position_ids": np.arange(c["max_position_embeddings"], dtype=np.int64)[None]}
    for i in range(c["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        for name in ("query", "key", "value"):
            out[p + f"attention.self.{name}.weight"], out[p + f"attention.self.{name}.bias"] = w(h, h), w(h)
        out[p + "attention.output.dense.weight"], out[p + "attention.output.dense.bias"] = w(h, h), w(h)
        out[p + "attention.output.LayerNorm.weight"] = 1 + w(h)
        out[p + "attention.output.LayerNorm.bias"] = w(h)
        out[p + "intermediate.dense.weight"], out[p + "intermediate.dense.bias"] = w(f, h), w(f)
        out[p + "output.dense.weight"], out[p + "output.dense.bias"] = w(h, f), w(h)
        out[p + "output.LayerNorm.weight"], out[p + "output.LayerNorm.bias"] = 1 + w(h), w(h)
    return out


def safetensors(arrays: dict[str, np.ndarray]) -> bytes:
    header, offset, blobs = {}, 0, []
    for name, array in arrays.items():
        data = array.tobytes()
        dtype = {np.float32: "F32", np.int64: "I64"}[array.dtype.type]
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    return struct.pack("<Q", len(head)) + head + b"".join(blobs)


def write(folder: Path) -> Path:
    folder = Path(folder)
    (folder / "1_Pooling").mkdir(parents=True, exist_ok=True)
    vocab = {piece: i for i, piece in enumerate(SPECIAL + WORDS)}
    tokenizer = {"model": {"type": "WordPiece", "unk_token": "[UNK]", "vocab": vocab,
                           "continuing_subword_prefix": "##"},
                 "added_tokens": [{"id": i, "content": t, "special": True}
                                  for i, t in enumerate(SPECIAL)]}
    (folder / "config.json").write_text(json.dumps(CONFIG))
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    (folder / "model.safetensors").write_bytes(safetensors(tensors()))
    return folder
