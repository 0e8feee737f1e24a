"""Choosing model and context settings from the hardware report."""

from dataclasses import dataclass

import llama_cpp

from .hardware import HardwareReport
from .model import ContextConfig

DEFAULT_MAX_CTX = 8192        # enough for long chats; larger only when asked for
KV_MEMORY_SHARE = 0.25        # at most this share of free memory for the KV cache
GPU_HEADROOM = 512 << 20      # compute buffers and the driver's own needs


@dataclass(frozen=True)
class Plan:
    config: ContextConfig
    offload: str              # "all layers on <device>", "12 of 30 layers on ...", "CPU only"

    def to_dict(self) -> dict:
        return {**self.config.__dict__, "offload": self.offload}


def plan(report: HardwareReport, model_bytes: int, n_layer_guess: int = 32,
         kv_bytes_per_token: int = 131072, n_ctx: "int | None" = None) -> Plan:
    """Settings for one model on this machine.

    kv_bytes_per_token is a generous guess before the model is loaded (the
    real figure only shrinks the context); n_ctx is the user's request.
    """
    gpu = max(report.gpus, key=lambda d: d.memory_free, default=None) if report.gpu_offload else None
    layers, offload = 0, "CPU only"
    memory_free = _host_free(report)
    if gpu is not None:
        budget = gpu.memory_free - GPU_HEADROOM
        if budget >= model_bytes * 1.1:
            layers, offload = -1, f"all layers on {gpu.name} ({gpu.description})"
            memory_free = budget - model_bytes
        elif budget > 0:
            layers = int(n_layer_guess * budget / (model_bytes * 1.1))
            offload = f"{layers} of {n_layer_guess} layers on {gpu.name} ({gpu.description})"
    fit = int(memory_free * KV_MEMORY_SHARE // kv_bytes_per_token) if memory_free else DEFAULT_MAX_CTX
    ctx = max(512, min(n_ctx or DEFAULT_MAX_CTX, fit if n_ctx is None else n_ctx))
    threads = max(1, report.physical_cores)
    # Flash attention only where layers run on a GPU: ggml-cpu's runs batches
    # under 64 rows one row at a time, so a question after a long restored
    # chat took 6x longer than without it, and each decode step 2.4x longer at
    # 4,000 tokens (bench/resume.py). Without it V is stored transposed; kvlayout
    # cuts both layouts.
    config = ContextConfig(n_ctx=ctx, n_batch=512, n_threads=threads, flash_attn=layers != 0,
                           type_k=llama_cpp.GGML_TYPE_F16, type_v=llama_cpp.GGML_TYPE_F16,
                           n_gpu_layers=layers)
    return Plan(config, offload)


def _host_free(report: HardwareReport) -> int:
    cpu = next((d for d in report.devices if d.type == "cpu"), None)
    return cpu.memory_free if cpu else 0
