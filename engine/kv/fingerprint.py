"""Fingerprints: which model file, and which KV configuration, produced a state.

Stored KV is only ever restored under the same fingerprint. Hashing a
multi-gigabyte file on every start would cost seconds, so the file's hash is
computed once and remembered in the archive, keyed by path, size and mtime.
"""

import hashlib
import json
from pathlib import Path

from chatdb.fingerprints import FingerprintCache

from ..llama import exact_kernels
from ..state import kvlayout

SAMPLE = 8 << 20  # bytes hashed at the start, middle and end of large files


def file_fingerprint(path: "str | Path", cache: "FingerprintCache | None" = None) -> str:
    path = Path(path)
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if cache is not None:
        known = cache.get(*key)
        if known:
            return known
    value = _hash_file(path, stat.st_size)
    if cache is not None:
        cache.put(*key, value)
    return value


def _hash_file(path: Path, size: int) -> str:
    """SHA-256 of the whole file if small, else of its size and three 8 MB samples."""
    digest = hashlib.sha256(str(size).encode())
    with open(path, "rb") as f:
        if size <= 3 * SAMPLE:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        else:
            for offset in (0, size // 2, size - SAMPLE):
                f.seek(offset)
                digest.update(f.read(SAMPLE))
    return digest.hexdigest()[:32]


def kv_fingerprint(model_fp: str, **config) -> str:
    """The fingerprint KV segments are stored under: model plus KV configuration."""
    blob = json.dumps({"model": model_fp, **config}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


# What told a target model's KV from a draft model's in the first stored
# fingerprints. The target's `scaled_ctx` was always false (the context is
# never set past the model's training length); it stays in the hash so that
# KV stored before keeps its fingerprint.
ROLE_FIELDS = {"target": {"scaled_ctx": False}, "draft": {"role": "draft"}}


def kv_config_fingerprint(model_fp: str, config, mode: str, role: str = "target") -> str:
    """The fingerprint of KV a model file makes under a context configuration (ContextConfig),
    as the model answering (target) or drafting for it (draft)."""
    return kv_fingerprint(model_fp, type_k=config.type_k, type_v=config.type_v,
                          flash_attn=config.flash_attn, mode=mode, layout=kvlayout.VERSION,
                          **ROLE_FIELDS[role], **placement_fields(config),
                          **exact_kernels.fingerprint_fields(config.n_gpu_layers))


def placement_fields(config) -> dict:
    """Where the KV was computed, where a GPU took part: another device (or another share
    of the layers on it) sums in another order, and its KV would give another answer than
    recomputing here. Absent on the CPU alone, so the CPU's fingerprints stay as stored
    before, and a GPU build whose devices are hidden shares the CPU build's KV."""
    if not config.devices:
        return {}
    return {"devices": list(config.devices), "gpu_layers": config.n_gpu_layers}
