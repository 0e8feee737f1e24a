"""Sampling settings and llama.cpp's own sampler chain built from them.

The chain runs in C: logit biases, the repeat / frequency / presence
penalties, then greedy, or top-k, top-p, min-p, temperature and a seeded
draw. Two things need the logits row itself, read in place from llama.cpp
(no copy into Python but the one row):

- a grammar (grammar.py): llama.cpp's grammar sampler, applied as llama.cpp's
  own common sampler does it. The chain picks a token; if the grammar
  allows it, it is taken; if not, the grammar masks the whole row and the
  chain picks again. The result is the chain's distribution restricted to
  what the grammar allows (a rejection step), at the cost of checking one
  token, not the whole vocabulary, on most steps.
- log-probabilities: of the model's own distribution (the row's
  log-softmax, before biases, penalties and the grammar), the chosen
  token's and the most likely alternatives'.
"""

import ctypes
import math
import random
from dataclasses import dataclass, field, replace

import llama_cpp
import numpy as np

from ..errors import EngineError
from .grammar import Grammar
from .model import caught_errors


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
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: tuple = ()                 # ((token, bias), ...); -100 keeps a token out
    grammar: "Grammar | None" = None
    logprobs: "int | None" = None          # None: none; n: each token's, and n alternatives

    def with_(self, **changes) -> "SamplingSettings":
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0

    @property
    def penalised(self) -> bool:
        """Whether the chain keeps a window of recent tokens (it is fed the prompt's tail)."""
        return self.repeat_penalty != 1.0 or bool(self.presence_penalty or self.frequency_penalty)


@dataclass(frozen=True)
class TokenLogprob:
    token: int
    logprob: float
    top: list = field(default_factory=list)      # [(token, logprob)], most likely first


class Sampler:
    """A llama.cpp sampler chain, with a grammar and log-probabilities where asked."""

    def __init__(self, settings: SamplingSettings, n_vocab: int = 0, vocab=None):
        self.settings = s = settings
        self.n_vocab = n_vocab
        self.last: "TokenLogprob | None" = None     # the last sampled token's, when asked
        params = llama_cpp.llama_sampler_chain_default_params()
        params.no_perf = True
        self.chain = llama_cpp.llama_sampler_chain_init(params)
        self.grammar = None
        try:
            self._build(s, n_vocab)
            if s.grammar is not None:
                with caught_errors():   # llama.cpp's parse errors: said by the EngineError
                    self.grammar = _grammar_sampler(vocab, s.grammar)
        except Exception:
            self.close()
            raise
        if s.grammar is not None or s.logprobs is not None:
            self._rows = _Candidates(n_vocab, reorders=not s.greedy)

    def _build(self, s: SamplingSettings, n_vocab: int) -> None:
        add = lambda smpl: llama_cpp.llama_sampler_chain_add(self.chain, smpl)  # noqa: E731
        if s.logit_bias:
            biases = (llama_cpp.llama_logit_bias * len(s.logit_bias))(
                *[llama_cpp.llama_logit_bias(token, -math.inf if bias <= -100 else bias)
                  for token, bias in s.logit_bias])
            add(llama_cpp.llama_sampler_init_logit_bias(n_vocab, len(s.logit_bias), biases))
        if s.penalised:
            if n_vocab <= 0:
                raise ValueError("the penalties need the vocabulary size")
            add(llama_cpp.llama_sampler_init_penalties(
                n_vocab, s.repeat_last_n, s.repeat_penalty, s.frequency_penalty, s.presence_penalty))
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
        """Feed context tokens to the chain (for the penalties' window)."""
        for token in tokens:
            llama_cpp.llama_sampler_accept(self.chain, token)

    def sample(self, ctx, index: int = -1) -> int:
        """Sample from the logits at batch `index` (and accept the token)."""
        if self.grammar is None and self.settings.logprobs is None:
            return llama_cpp.llama_sampler_sample(self.chain, ctx, index)
        row = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, index), (self.n_vocab,))
        if self.grammar is None:
            token = llama_cpp.llama_sampler_sample(self.chain, ctx, index)
        else:
            token = self._constrained(row)
        if self.settings.logprobs is not None:
            self.last = logprobs_of(row, token, self.settings.logprobs)
        return token

    def _constrained(self, row: np.ndarray) -> int:
        rows = self._rows
        token = rows.pick(self.chain, row)
        if not rows.allows(self.grammar, token, row):
            rows.fill(row)
            llama_cpp.llama_sampler_apply(self.grammar, rows.ref)
            token = rows.pick(self.chain, None)
        llama_cpp.llama_sampler_accept(self.chain, token)
        llama_cpp.llama_sampler_accept(self.grammar, token)
        return token

    def close(self) -> None:
        if self.chain is not None:
            llama_cpp.llama_sampler_free(self.chain)
            self.chain = None
        if self.grammar is not None:
            llama_cpp.llama_sampler_free(self.grammar)
            self.grammar = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _Candidates:
    """A reusable llama_token_data_array over the whole vocabulary, filled from a row."""

    def __init__(self, n_vocab: int, reorders: bool):
        self.reorders = reorders       # top-k and top-p sort and cut the array; greedy does not
        self.data = (llama_cpp.llama_token_data * n_vocab)()
        view = np.ctypeslib.as_array(self.data)          # a structured view of the same memory
        self.ids, self.logits, self.p = view["id"], view["logit"], view["p"]
        self.array = llama_cpp.llama_token_data_array(self.data, n_vocab, -1, False)
        self.ref = ctypes.byref(self.array)
        self.one = (llama_cpp.llama_token_data * 1)()
        self.one_array = llama_cpp.llama_token_data_array(self.one, 1, -1, False)
        self.n_vocab = n_vocab
        self.order = np.arange(n_vocab, dtype=np.int32)
        self.ids[:] = self.order
        self.in_order = True

    def fill(self, row: np.ndarray) -> None:
        if not self.in_order:
            self.ids[:] = self.order
            self.p[:] = 0
        self.logits[:] = row
        self.in_order = not self.reorders
        self.array.size, self.array.selected, self.array.sorted = self.n_vocab, -1, False

    def pick(self, chain, row: "np.ndarray | None") -> int:
        """The chain's choice over the candidates (refilled from `row` unless None)."""
        if row is not None:
            self.fill(row)
        llama_cpp.llama_sampler_apply(chain, self.ref)
        if self.array.selected < 0:
            raise EngineError("the sampler chose no token (the grammar allows none here)")
        return int(self.data[self.array.selected].id)

    def allows(self, grammar, token: int, row: np.ndarray) -> bool:
        self.one[0].id, self.one[0].logit, self.one[0].p = token, float(row[token]), 0.0
        self.one_array.size, self.one_array.selected, self.one_array.sorted = 1, -1, False
        llama_cpp.llama_sampler_apply(grammar, ctypes.byref(self.one_array))
        return math.isfinite(self.one[0].logit)


def _grammar_sampler(vocab, grammar: Grammar):
    text = grammar.text.encode()
    if grammar.trigger is None:
        smpl = llama_cpp.llama_sampler_init_grammar(vocab, text, b"root")
    else:
        # Free text until the trigger; from its start on, the grammar (llama.cpp
        # matches the pattern against the whole output, from its first group on).
        pattern = f"[\\s\\S]*?({_regex(grammar.trigger)}[\\s\\S]*)".encode()
        patterns = (ctypes.c_char_p * 1)(pattern)
        smpl = llama_cpp.llama_sampler_init_grammar_lazy_patterns(
            vocab, text, b"root", patterns, 1, (llama_cpp.llama_token * 1)(), 0)
    if not smpl:
        raise EngineError("llama.cpp could not parse the grammar")
    return smpl


def check_grammar(vocab, grammar: Grammar) -> None:
    """EngineError unless llama.cpp parses `grammar` (before a turn is begun for it)."""
    with caught_errors():
        llama_cpp.llama_sampler_free(_grammar_sampler(vocab, grammar))


def _regex(literal: str) -> str:
    return "".join("\\" + c if c in r".^$*+?()[]{}|\/" else c for c in literal)


def logprobs_of(row: np.ndarray, token: int, top: int) -> TokenLogprob:
    """The token's log-probability under the row's softmax, and the `top` most likely."""
    peak = float(row.max())
    total = peak + math.log(float(np.exp(row - peak).sum()))
    best = []
    if top:
        ids = np.argpartition(-row, top)[:top]
        ids = ids[np.argsort(-row[ids], kind="stable")]
        best = [(int(i), float(row[i]) - total) for i in ids]
    return TokenLogprob(int(token), float(row[token]) - total, best)
