"""A token's logits do not depend on the batch it is computed in (engine/llama/exact_kernels.py).

Gemma 3 270M's Q4_K weights are the ones llama.cpp's repacked and tiled CPU
kernels take: with them, a token checked in a batch of 4 or more got other
logits than stepped alone.
"""

import llama_cpp
import numpy as np
import pytest

from engine.errors import EngineError
from engine.kv.fingerprint import kv_config_fingerprint
from engine.llama import exact_kernels
from engine.llama.model import ContextConfig, Model
from engine.llama.sequence import Sequence

CODE = "\n".join(f"def volume_{i}(width, height, depth):\n    return width * height * depth - {i}"
                 for i in range(12))


@pytest.fixture(scope="module")
def gemma(gemma_path):
    model = Model(str(gemma_path), ContextConfig(n_ctx=1024, n_batch=512, n_threads=2,
                                                 flash_attn=False))
    yield model
    model.close()


def _batched(model: Model, prompt: list, tokens: list, size: int) -> list:
    """Each token's logits, the first stepped alone, the others checked `size` at a time
    (size 1: every one stepped alone)."""
    seq = Sequence(model)
    try:
        seq.prefill(prompt)
        seq.step(tokens[0])
        rows = [model.logits().copy()]
        for at in range(1, len(tokens), size):
            part = tokens[at:at + size]
            if size == 1:
                seq.step(part[0])
            else:
                seq.verify(part)
            rows += [model.logits(j if size > 1 else -1).copy() for j in range(len(part))]
        return rows
    finally:
        seq.keep(0)
        seq.close()


def test_gemma_logits_are_the_same_bits_in_every_batch_size(gemma):
    prompt = gemma.tokenize(f"Here is a file:\n{CODE}\nRepeat it, renaming volume to size:\n")
    tokens = gemma.tokenize(CODE.replace("volume", "size"), special=False)[:33]
    alone = _batched(gemma, prompt, tokens, 1)
    for size in (4, 5, 8, 16):
        batched = _batched(gemma, prompt, tokens, size)
        apart = [i for i, (a, b) in enumerate(zip(alone, batched)) if not np.array_equal(a, b)]
        assert not apart, f"batches of {size}: tokens {apart} got other logits than alone"


def test_off_keeps_llama_cpps_kernels_and_its_own_fingerprint(monkeypatch):
    params = llama_cpp.llama_model_default_params()
    params.n_gpu_layers = 0
    config = ContextConfig(n_ctx=512, n_batch=64, n_threads=1, flash_attn=False)
    exact = kv_config_fingerprint("m", config, "rows")
    monkeypatch.setenv(exact_kernels.ENV, "off")
    exact_kernels.apply(params)
    assert params.use_extra_bufts
    assert kv_config_fingerprint("m", config, "rows") != exact
    monkeypatch.setenv(exact_kernels.ENV, "on")
    exact_kernels.apply(params)
    assert not params.use_extra_bufts
    assert kv_config_fingerprint("m", config, "rows") == exact


def test_a_bad_value_is_one_clear_error(monkeypatch):
    monkeypatch.setenv(exact_kernels.ENV, "fast")
    with pytest.raises(EngineError, match="CHATDB_EXACT_KERNELS must be on or off, not 'fast'"):
        exact_kernels.wanted()


def test_a_model_with_layers_on_a_gpu_is_loaded_as_llama_cpp_plans_it(monkeypatch):
    params = llama_cpp.llama_model_default_params()
    params.n_gpu_layers = -1
    exact_kernels.apply(params)
    assert params.use_extra_bufts
    # ... so the setting does not tell its KV apart
    config = ContextConfig(n_ctx=512, n_batch=64, n_threads=1, flash_attn=False, n_gpu_layers=-1)
    on = kv_config_fingerprint("m", config, "rows")
    monkeypatch.setenv(exact_kernels.ENV, "off")
    assert kv_config_fingerprint("m", config, "rows") == on
