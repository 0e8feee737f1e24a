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
        "kv": {"mode": engine.kv_mode, "memory": model.memory_kind(),
               "stored_as": engine.kv_mode.stored_as, "fingerprint": engine.fingerprint,
               "enabled": engine.use_kv, "type": name_of(model.config.type_k, model.config.type_v),
               "bytes_per_token": layout.row_bytes_per_token if layout else None,
               "window": layout.window if layout else None,
               "window_bytes_per_token": layout.part_bytes(1) if layout and layout.window else None},
        "hardware": engine.hardware.to_dict(),
        **engine.tuning.describe(),
    }
