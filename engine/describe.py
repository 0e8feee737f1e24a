"""The engine's own account of itself, for `chatdb doctor` and the console's /model."""

from .kv.kv_type import name_of


def describe(engine) -> dict:
    """Model, settings chosen, speculative decoding, KV storage and hardware, as plain data."""
    model, layout = engine.model, engine.layout
    template = engine.chat_format.kind
    return {
        "model": {"path": model.path, "description": model.description(),
                  "size_bytes": model.size_bytes(), "n_ctx_train": model.n_ctx_train(),
                  "chat_template": template},
        "settings": {**model.config.__dict__, "offload": engine.offload},
        "speculative": {"mode": engine.draft_mode,
                        "draft_model": engine.draft.model.path if engine.draft else None,
                        "archive_index": engine.archive_drafts.describe()},
        "kv": {"mode": engine.kv_mode, "memory": model.memory_kind(), "held_in": held_in(model),
               "stored_as": engine.kv_mode.stored_as, "fingerprint": engine.fingerprint,
               "enabled": engine.use_kv, "type": name_of(model.config.type_k, model.config.type_v),
               "bytes_per_token": layout.row_bytes_per_token if layout else None,
               "window": layout.window if layout else None,
               "window_bytes_per_token": layout.part_bytes(1) if layout and layout.window else None},
        "hardware": engine.hardware.to_dict(),
        **engine.tuning.describe(),
    }


def held_in(model) -> str:
    """Where the live KV cache is: with each layer, on the GPUs for the layers offloaded
    (llama.cpp's offload_kqv, on by default), else in host memory."""
    config = model.config
    if config.n_gpu_layers == 0 or not config.devices:
        return "host memory"
    names = " and ".join(device.split(": ")[0] for device in config.devices)
    if config.n_gpu_layers < 0 or config.n_gpu_layers >= model.n_layer:
        return f"{names}'s memory"
    return (f"{names}'s memory for {config.n_gpu_layers} of {model.n_layer} layers, "
            f"host memory for the rest")
