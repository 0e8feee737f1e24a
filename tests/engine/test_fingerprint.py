"""KV fingerprints: KV stored by earlier versions keeps its fingerprint."""

import llama_cpp

from engine.state import kvlayout
from engine.kv.fingerprint import kv_config_fingerprint, kv_fingerprint
from engine.llama.model import ContextConfig

CONFIG = ContextConfig(n_ctx=2048, n_batch=512, n_threads=2, flash_attn=False,
                       type_k=llama_cpp.GGML_TYPE_F16, type_v=llama_cpp.GGML_TYPE_F16)


def _stored_before(mode: str, **extra) -> str:
    """The fingerprint as the engine wrote it when it still took keyword fields."""
    return kv_fingerprint("model-hash", type_k=CONFIG.type_k, type_v=CONFIG.type_v,
                          flash_attn=CONFIG.flash_attn, mode=mode, layout=kvlayout.VERSION, **extra)


def test_target_and_draft_fingerprints_are_those_stored_before():
    for mode in ("rows", "snapshot"):
        assert kv_config_fingerprint("model-hash", CONFIG, mode) == _stored_before(mode, scaled_ctx=False)
        assert (kv_config_fingerprint("model-hash", CONFIG, mode, role="draft")
                == _stored_before(mode, role="draft"))
    assert kv_config_fingerprint("model-hash", CONFIG, "rows") != \
        kv_config_fingerprint("model-hash", CONFIG, "rows", role="draft")


def test_kv_computed_on_a_gpu_has_its_own_fingerprint_and_the_cpus_stays_as_before():
    on_gpu = ContextConfig(**{**CONFIG.__dict__, "n_gpu_layers": -1, "devices": ("Vulkan0: llvmpipe",)})
    partly = ContextConfig(**{**on_gpu.__dict__, "n_gpu_layers": 12})
    other = ContextConfig(**{**on_gpu.__dict__, "devices": ("CUDA0: NVIDIA H200",)})
    prints = {kv_config_fingerprint("model-hash", c, "rows") for c in (CONFIG, on_gpu, partly, other)}
    assert len(prints) == 4
    assert kv_config_fingerprint("model-hash", CONFIG, "rows") == _stored_before("rows", scaled_ctx=False)
