"""Loading a model for the console, with progress, and saying what it runs on."""

import time
from dataclasses import dataclass
from pathlib import Path

from engine.decode.modes import DraftMode

from .screen.render import Renderer, Waiting


@dataclass(frozen=True)
class EngineOptions:
    model: "str | None"        # --model; None: $CHATDB_MODEL, else the default model
    n_ctx: "int | None"
    use_kv: bool
    draft: DraftMode = DraftMode.AUTO   # speculative decoding: auto, lookup, model, off
    draft_model: "str | None" = None
    threads: "int | None" = None   # --threads; None: $CHATDB_THREADS, else chosen turn by turn
    kv_type: "str | None" = None   # --kv-type; None: $CHATDB_KV_TYPE, else the archive's


def load_engine(render: Renderer, archive, options: EngineOptions, sampling):
    """(engine, seconds it took). Shows a progress line if loading takes over a second."""
    from engine.chat import Engine  # llama.cpp: loaded only once the archive is known good
    from engine.llama.model_path import resolve_model_path

    path = resolve_model_path(options.model)
    started = time.perf_counter()
    with Waiting(render, f"loading {path.name}"):
        engine = Engine.open(archive, path, n_ctx=options.n_ctx, use_kv=options.use_kv,
                             sampling=sampling, warn=render.warning, draft=options.draft,
                             draft_model=options.draft_model, threads=options.threads,
                             kv_type=options.kv_type)
    return engine, time.perf_counter() - started


def swap_engine(render: Renderer, archive, engine, current: EngineOptions, options: EngineOptions):
    """(engine, seconds it took, None) for `options`, after closing `engine`; if loading
    fails, (the engine of `current` loaded back, None, the error). The sampling settings
    go over to the new engine."""
    from engine.llama.model_path import resolve_model_path

    resolve_model_path(options.model)  # a wrong path fails before the model is let go
    sampling = engine.sampling
    engine.close()  # stores the pending KV first; two models need not fit at once
    try:
        return (*load_engine(render, archive, options, sampling), None)
    except BaseException as exc:
        return load_engine(render, archive, current, sampling)[0], None, exc


def model_name(engine) -> str:
    return Path(engine.model.path).name.removesuffix(".gguf")


def backend_phrase(engine) -> str:
    """`CPU (Intel Xeon, 2 threads)` or `CUDA: all layers on CUDA0 (NVIDIA H200)`."""
    info = engine.describe()
    hardware, settings = info["hardware"], info["settings"]
    if settings.get("n_gpu_layers", 0) != 0:
        gpus = [d for d in hardware["devices"] if d["type"] in ("gpu", "igpu")]
        backend = gpus[0]["backend"] if gpus else "GPU"
        return f"{backend}: {settings['offload']}"
    cpu = next((d for d in hardware["devices"] if d["type"] == "cpu"), None)
    about = f"{cpu['description']}, " if cpu and cpu["description"] else ""
    return f"CPU ({about}{threads_phrase(info)})"


def threads_phrase(info: dict) -> str:
    """`2 threads` or `1 thread decoding, 2 prefill`."""
    decode, batch = info["threads"]["decode"], info["threads"]["batch"]
    if decode == batch:
        return f"{decode} thread{'s' if decode > 1 else ''}"
    return f"{decode} thread{'s' if decode > 1 else ''} decoding, {batch} prefill"


def model_phrase(engine) -> str:
    info = engine.describe()["model"]
    return f"{model_name(engine)} ({info['description']}, {engine.model.n_ctx:,}-token context)"
