"""A BERT sentence embedding computed in numpy from a sentence-transformers model's own
weights (model.safetensors): what the GGUF converted from it must reproduce in llama.cpp.

    reference_embedding(model_zip, token_ids) -> unit vector (mean pooling, as 1_Pooling says)
"""

import math

import numpy as np

from engine.embed.convert import Source, read_safetensors


class ReferenceBert:
    def __init__(self, source_path):
        source = Source(source_path)
        self.config = source.json("config.json")
        self.w = {k.removeprefix("bert."): v.astype(np.float32)
                  for k, v in read_safetensors(source.read("model.safetensors")).items()
                  if v.dtype != np.int64}

    def embed(self, tokens: list[int]) -> np.ndarray:
        w, c = self.w, self.config
        n = len(tokens)
        x = (w["embeddings.word_embeddings.weight"][tokens]
             + w["embeddings.position_embeddings.weight"][:n]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = layer_norm(x, w, "embeddings.LayerNorm", c["layer_norm_eps"])
        heads = c["num_attention_heads"]
        for i in range(c["num_hidden_layers"]):
            p = f"encoder.layer.{i}."
            q, k, v = (linear(x, w, p + f"attention.self.{name}") for name in ("query", "key", "value"))
            split = lambda t: t.reshape(n, heads, -1).transpose(1, 0, 2)
            q, k, v = split(q), split(k), split(v)
            scores = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            attended = (scores / scores.sum(-1, keepdims=True)) @ v
            attended = attended.transpose(1, 0, 2).reshape(n, -1)
            x = layer_norm(x + linear(attended, w, p + "attention.output.dense"), w,
                           p + "attention.output.LayerNorm", c["layer_norm_eps"])
            hidden = gelu(linear(x, w, p + "intermediate.dense"))
            x = layer_norm(x + linear(hidden, w, p + "output.dense"), w, p + "output.LayerNorm",
                           c["layer_norm_eps"])
        pooled = x.mean(axis=0)
        return pooled / np.linalg.norm(pooled)


def linear(x, w, name):
    return x @ w[name + ".weight"].T + w[name + ".bias"]


def layer_norm(x, w, name, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w[name + ".weight"] + w[name + ".bias"]


def gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
