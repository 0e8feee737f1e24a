"""Choosing where the model runs and how long a context it gets, before loading it.

From the model file's own header (gguf_header: its layers' sizes and its KV
bytes per token) and the devices' free memory (hardware): every layer on the
GPUs when the weights and the context's KV fit, else as many layers as fit
(llama.cpp places the last n_gpu_layers blocks on the GPUs, spread over all
of them in proportion to their free memory), else the CPU.
"""

import os
from dataclasses import dataclass

from chatdb.errors import ChatdbError
from chatdb.kv.budget import format_size, parse_size

from ..errors import EngineError
from ..kv.kv_type import DEFAULT, KV_TYPES, KVType
from ..llama.batch import GPU_MEMORY_ENV
from ..llama.gguf_header import ModelFacts
from ..llama.model import ContextConfig
from .hardware import HardwareReport
from .threads import ThreadChoice

DEFAULT_MAX_CTX = 8192        # enough for long chats; larger only when asked for
MIN_FULL_CTX = 2048           # all layers on the GPU with at least this context beats partial offload
MIN_CTX = 512
CTX_STEP = 256
KV_MEMORY_SHARE = 0.25        # at most this share of free host memory for the KV cache
GPU_HEADROOM = 512 << 20      # per GPU: compute buffers and the driver's own needs
# At most this much of the GPUs' memory (together) is planned for the weights and the KV
# cache: room left for other programs, or a smaller device's plan tried on a larger one.
MEMORY_ENV = GPU_MEMORY_ENV
FLASH_ENV = "CHATDB_FLASH_ATTN"


@dataclass(frozen=True)
class OffloadPlan:
    config: ContextConfig
    offload: str              # "all 30 layers on CUDA0 (...)", "12 of 30 layers on ...", "CPU only"


def plan_offload(report: HardwareReport, facts: ModelFacts, n_ctx: "int | None" = None,
                 threads: "ThreadChoice | None" = None, n_seq: int = 1,
                 kv_type: KVType = KV_TYPES[DEFAULT]) -> OffloadPlan:
    """Settings for one model on this machine; n_ctx is the user's request (kept as asked),
    for each of `n_seq` sequences sharing the context (a server's, with a KV stream each);
    `kv_type` (kv_type.py) says how the KV cache holds its values."""
    wanted = n_ctx or min(DEFAULT_MAX_CTX, facts.n_ctx_train or DEFAULT_MAX_CTX)
    visible = report.gpus if report.gpu_offload else []
    gpus = [g for g in visible if g.memory_free > GPU_HEADROOM]
    budget = sum(g.memory_free - GPU_HEADROOM for g in gpus)
    cap = memory_cap()
    if cap is not None:
        budget = min(budget, cap)
    layers, ctx = _offload(facts, budget, wanted, fixed=n_ctx is not None, n_seq=n_seq)
    if n_ctx is None:  # the KV of layers left on the CPU must fit host memory too
        host = facts.kv_bytes_per_token_layer() * (facts.n_layer - min(layers, facts.n_layer))
        if host > 0 and _host_free(report):
            ctx = min(ctx, _round(_host_free(report) * KV_MEMORY_SHARE / host / n_seq))
    threads = threads or ThreadChoice(max(1, report.physical_cores), max(1, report.physical_cores), "")
    # Flash attention only where layers run on a GPU: ggml-cpu's runs batches
    # under 64 rows one row at a time, so a question after a long restored
    # chat took 6x longer than without it, and each decode step 2.4x longer at
    # 4,000 tokens (bench/resume.py). Without it V is stored transposed; kvlayout
    # cuts both layouts. A quantized V cache needs it, on every device.
    flash = _flash(kv_type, layers != 0, software=any(g.software for g in gpus or visible))
    config = ContextConfig(n_ctx=max(MIN_CTX, ctx), n_batch=512, n_threads=threads.decode,
                           n_threads_batch=threads.batch, flash_attn=flash,
                           type_k=kv_type.type_k, type_v=kv_type.type_v,
                           n_gpu_layers=-1 if layers > facts.n_layer else layers, n_seq_max=n_seq,
                           devices=tuple(f"{g.name}: {g.description}" for g in visible))
    return OffloadPlan(config, _describe(layers, facts.n_layer, gpus or visible, cap))


def _flash(kv_type: KVType, on_gpu: bool, software: bool = False) -> bool:
    """Flash attention as $CHATDB_FLASH_ATTN says (on, off; auto: as above, and off on a
    software device: Mesa 22's llvmpipe crashes at a few-row batch after single steps,
    speculative decoding's verifications, and runs no faster with it). Off by hand is for
    another device whose driver fails at it."""
    asked = os.environ.get(FLASH_ENV, "auto")
    if asked not in ("on", "off", "auto"):
        raise EngineError(f"{FLASH_ENV}={asked!r}: expected on, off or auto")
    if asked == "off" and kv_type.flash_attn:
        raise EngineError(f"{FLASH_ENV}=off: {kv_type.name} KV needs flash attention")
    if asked != "auto":
        return asked == "on"
    return kv_type.flash_attn if kv_type.flash_attn is not None else on_gpu and not software


def memory_cap() -> "int | None":
    """$CHATDB_GPU_MEMORY as bytes (None: unset or unlimited); EngineError if it is no size."""
    text = os.environ.get(MEMORY_ENV)
    if not text:
        return None
    try:
        return parse_size(text)
    except ChatdbError as exc:
        raise EngineError(f"{MEMORY_ENV}: {exc}") from None


def _offload(facts: ModelFacts, budget: int, wanted: int, fixed: bool,
             n_seq: int = 1) -> "tuple[int, int]":
    """(layers on the GPUs, n_layer + 1 meaning all with the output layer; context size
    of each of n_seq sequences)."""
    if budget <= 0 or facts.n_layer == 0:
        return 0, wanted
    per_token = facts.kv_bytes_per_token * n_seq
    full = sum(facts.layer_bytes) + facts.output_bytes
    if full + per_token * wanted <= budget:
        return facts.n_layer + 1, wanted
    fit = _round((budget - full) / per_token) if budget > full else 0
    if not fixed and fit >= MIN_FULL_CTX:
        return facts.n_layer + 1, fit
    layer_kv, used, n = facts.kv_bytes_per_token_layer() * wanted * n_seq, 0.0, 0
    for size in reversed(facts.layer_bytes):  # llama.cpp offloads the last layers first
        if used + size + layer_kv > budget:
            break
        used, n = used + size + layer_kv, n + 1
    return n, wanted


def _round(tokens: float) -> int:
    return max(0, int(tokens) // CTX_STEP * CTX_STEP)


def _describe(layers: int, n_layer: int, gpus, cap: "int | None") -> str:
    """Where the layers go; where a GPU is left some or all of them, why."""
    capped = f" ({MEMORY_ENV} allows {format_size(cap)})" if cap is not None else ""
    where = " and ".join(f"{g.name} ({g.description})" for g in gpus)
    if not gpus:
        return "CPU only"
    if layers == 0:
        free = format_size(sum(g.memory_free for g in gpus))
        return f"CPU only: no layer fits the memory of {where} ({free} free){capped}"
    if layers > n_layer:
        return f"all {n_layer} layers on {where}"
    return f"{layers} of {n_layer} layers on {where}, the rest on the CPU: no more fit{capped}"


def _host_free(report: HardwareReport) -> int:
    cpu = next((d for d in report.devices if d.type == "cpu"), None)
    return cpu.memory_free if cpu else 0
