"""How the KV cache holds its values: f16, or q8_0 for about half the bytes.

llama.cpp quantizes K with any attention path, but a quantized V cache needs
its flash attention: with q8_0 flash attention is on, also on the CPU where
chatdb otherwise runs without it (ggml-cpu's is slow for small batches;
docs/kv-budget.md says what q8_0 costs there). The type is part of the KV
fingerprint (type_k, type_v, flash_attn), so KV stored under one type is only
ever restored under the same, and a resumed chat computes exactly as the
uninterrupted one.

An archive keeps the type its processes use (setting 'kv_type', `chatdb kv
type`), so that the console, `ask` and `chatdb serve` share their KV;
--kv-type or $CHATDB_KV_TYPE override it for one process.
"""

import os
from dataclasses import dataclass

from ..errors import EngineError

ENV = "CHATDB_KV_TYPE"
KEY = "kv_type"


@dataclass(frozen=True)
class KVType:
    name: str
    ggml: str                   # the ggml type K and V are both held in (GGML_TYPE_<ggml>)
    flash_attn: "bool | None"   # None: as the device runs best (on with layers on a GPU)

    @property
    def type_k(self) -> int:
        return _ggml_type(self.ggml)

    @property
    def type_v(self) -> int:
        return _ggml_type(self.ggml)


def _ggml_type(name: str) -> int:
    # Imported here, not with the module: the command line offers the types' names
    # (--kv-type) before anything loads llama.cpp.
    import llama_cpp

    return getattr(llama_cpp, f"GGML_TYPE_{name}")


KV_TYPES = {
    "f16": KVType("f16", "F16", None),
    "q8_0": KVType("q8_0", "Q8_0", True),
}
DEFAULT = "f16"


def check(name: str) -> KVType:
    """The KV type called `name`; EngineError naming the ones there are."""
    try:
        return KV_TYPES[name]
    except KeyError:
        raise EngineError(f"unknown KV type {name!r} (expected {' or '.join(KV_TYPES)})") from None


def chosen(explicit: "str | None", archive) -> KVType:
    """The type this process uses: `explicit` (--kv-type), else $CHATDB_KV_TYPE, else the
    archive's, else the default."""
    return check(explicit or os.environ.get(ENV) or archive.settings.get(KEY) or DEFAULT)


def name_of(type_k: int, type_v: int) -> str:
    """The name of a context's KV types (as doctor reports them)."""
    return next((t.name for t in KV_TYPES.values() if (t.type_k, t.type_v) == (type_k, type_v)),
                f"type_k {type_k}, type_v {type_v}")
