"""Sampling settings and llama.cpp's own sampler chain built from them."""

import random
from dataclasses import dataclass, replace

import llama_cpp


@dataclass(frozen=True)
class SamplingSettings:
    temperature: float = 0.8
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    repeat_last_n: int = 64
    seed: "int | None" = None
    max_tokens: int = 1024

    def with_(self, **changes) -> "SamplingSettings":
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0


class Sampler:
    """A llama.cpp sampler chain (runs in C: no logit rows copied into Python)."""

    def __init__(self, settings: SamplingSettings, n_vocab: int = 0):
        self.settings = s = settings
        params = llama_cpp.llama_sampler_chain_default_params()
        params.no_perf = True
        self.chain = llama_cpp.llama_sampler_chain_init(params)
        add = lambda smpl: llama_cpp.llama_sampler_chain_add(self.chain, smpl)  # noqa: E731
        if s.repeat_penalty != 1.0:
            if n_vocab <= 0:
                raise ValueError("the repeat penalty needs the vocabulary size")
            add(llama_cpp.llama_sampler_init_penalties(
                n_vocab, s.repeat_last_n, s.repeat_penalty, 0.0, 0.0))
        if s.greedy:
            add(llama_cpp.llama_sampler_init_greedy())
            return
        seed = s.seed if s.seed is not None else random.randrange(2**32)
        add(llama_cpp.llama_sampler_init_top_k(s.top_k))
        add(llama_cpp.llama_sampler_init_top_p(s.top_p, 1))
        add(llama_cpp.llama_sampler_init_min_p(s.min_p, 1))
        add(llama_cpp.llama_sampler_init_temp(s.temperature))
        add(llama_cpp.llama_sampler_init_dist(seed & 0xFFFFFFFF))

    def accept(self, tokens) -> None:
        """Feed context tokens to the chain (for the repeat penalty's window)."""
        for token in tokens:
            llama_cpp.llama_sampler_accept(self.chain, token)

    def sample(self, ctx, index: int = -1) -> int:
        """Sample from the logits at batch `index` (and accept the token)."""
        return llama_cpp.llama_sampler_sample(self.chain, ctx, index)

    def close(self) -> None:
        if self.chain is not None:
            llama_cpp.llama_sampler_free(self.chain)
            self.chain = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
