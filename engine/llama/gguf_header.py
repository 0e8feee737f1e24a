"""The facts offload planning needs, read from a GGUF file's header before loading it.

A GGUF file starts with its metadata (key, type, value) and a table of
tensors (name, shape, type, offset into the data section). Reading it costs
a pass over the header only (the vocabulary is the largest part): no weights
are read. Tensor sizes are the gaps between successive offsets, so no table
of quantisation block sizes is needed; the vocabulary's strings are skipped.
"""

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import EngineError

MAGIC = b"GGUF"
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9
F16_BYTES = 2


@dataclass(frozen=True)
class ModelFacts:
    arch: str
    n_layer: int
    n_ctx_train: int
    kv_bytes_per_token: int        # K and V of every layer at F16
    layer_bytes: list[int]         # weights of each repeating block (blk.N.*)
    output_bytes: int              # the output layer and its norm (offloaded with "all layers")
    other_bytes: int               # token embeddings and the rest (stay in host memory)
    tied_bytes: int = 0            # of output_bytes, a copy of the token embeddings (not in the file)
    metadata: dict = field(default_factory=dict, repr=False)

    @property
    def weight_bytes(self) -> int:
        """The weights as stored in the file (what llama.cpp reports as the model's size)."""
        return sum(self.layer_bytes) + self.output_bytes + self.other_bytes - self.tied_bytes

    def kv_bytes_per_token_layer(self) -> float:
        return self.kv_bytes_per_token / max(1, self.n_layer)


class _Reader:
    """Reads the header from a growing in-memory copy of the file's start.

    Every length and count is checked against what is left of the file before
    anything is read or allocated: a damaged or crafted header (a string of
    2**63 bytes) is an error, not a MemoryError.
    """

    def __init__(self, f):
        self.f, self.buf, self.pos = f, b"", 0
        self.size = os.fstat(f.fileno()).st_size

    def _need(self, n: int) -> None:
        if self.pos + n > self.size:
            raise EngineError("the GGUF header is damaged or truncated (a length runs past the end "
                              "of the file)")
        while self.pos + n > len(self.buf):
            more = self.f.read(max(1 << 20, len(self.buf), self.pos + n - len(self.buf)))
            if not more:
                raise EngineError("the GGUF header is truncated")
            self.buf += more

    def read(self, fmt: str):
        size = struct.calcsize("<" + fmt)
        self._need(size)
        value = struct.unpack_from("<" + fmt, self.buf, self.pos)[0]
        self.pos += size
        return value

    def _skip_strings(self, count: int) -> None:
        length = struct.Struct("<Q").unpack_from
        for _ in range(count):  # the hot loop of a header read: 100,000 strings and more
            if self.pos + 8 > len(self.buf):
                self._need(8)
            self.pos += 8 + length(self.buf, self.pos)[0]
        self._need(0)

    def string(self) -> str:
        n = self.read("Q")
        self._need(n)
        self.pos += n
        return self.buf[self.pos - n: self.pos].decode("utf-8", errors="replace")

    def value(self, kind: int):
        if kind in SCALARS:
            return self.read(SCALARS[kind])
        if kind == STRING:
            return self.string()
        if kind == ARRAY:
            inner, n = self.read("I"), self.read("Q")
            if inner in SCALARS:  # numeric arrays in one go
                self._need(n * struct.calcsize("<" + SCALARS[inner]))
                fmt = f"<{n}{SCALARS[inner]}"
                values = list(struct.unpack_from(fmt, self.buf, self.pos))
                self.pos += struct.calcsize(fmt)
                return values
            if inner == STRING:  # the vocabulary: only its length matters here
                self._need(min(n, self.size) * 8)   # 8 bytes of length each, at least
                self._skip_strings(n)
                return n
            return [self.value(inner) for _ in range(n)]
        raise EngineError(f"unknown GGUF value type {kind}")


def read_header(path: "str | Path") -> "tuple[dict, list[tuple[str, int]], int]":
    """(metadata, [(tensor name, offset)], start of the data section)."""
    try:
        return _read_header(path)
    except (struct.error, ValueError, TypeError, OverflowError, ZeroDivisionError) as exc:
        raise EngineError(f"{path}: the GGUF header is damaged ({exc})") from None
    except EngineError as exc:
        raise EngineError(str(exc) if str(path) in str(exc) else f"{path}: {exc}") from None


def _read_header(path: "str | Path") -> "tuple[dict, list[tuple[str, int]], int]":
    with open(path, "rb") as f:
        if f.read(4) != MAGIC:
            raise EngineError(f"{path} is not a GGUF file")
        r = _Reader(f)
        version = r.read("I")
        if version < 2:
            raise EngineError(f"{path}: GGUF version {version} is too old")
        n_tensors, n_kv = r.read("Q"), r.read("Q")
        metadata = {}
        for _ in range(n_kv):
            key = r.string()
            metadata[key] = r.value(r.read("I"))
        tensors = []
        for _ in range(n_tensors):
            name = r.string()
            n_dims = r.read("I")
            for _ in range(n_dims):
                r.read("Q")
            r.read("I")  # type
            tensors.append((name, r.read("Q")))
        align = int(metadata.get("general.alignment", 32))
        if align < 1:
            raise ValueError(f"alignment {align}")
        start = -(-r.pos // align) * align
    return metadata, tensors, start


def read_facts(path: "str | Path") -> ModelFacts:
    metadata, tensors, start = read_header(path)
    try:
        return _facts(path, metadata, tensors, start)
    except (ValueError, TypeError, OverflowError, ZeroDivisionError, AttributeError) as exc:
        raise EngineError(f"{path}: the GGUF header is damaged ({type(exc).__name__}: {exc})") from None


def _facts(path, metadata: dict, tensors: list, start: int) -> ModelFacts:
    arch = metadata.get("general.architecture", "")
    get = lambda key, default=0: metadata.get(f"{arch}.{key}", default)  # noqa: E731
    n_layer = int(get("block_count"))
    if not 0 <= n_layer <= len(tensors):  # every block has tensors of its own
        raise ValueError(f"{n_layer} blocks in a file of {len(tensors)} tensors")
    sizes = _sizes(tensors, Path(path).stat().st_size - start)
    layer_bytes = [0] * n_layer
    output = other = 0
    for name, size in sizes.items():
        parts = name.split(".")
        if parts[0] == "blk" and parts[1].isdigit() and int(parts[1]) < n_layer:
            layer_bytes[int(parts[1])] += size
        elif name.startswith("output"):
            output += size
        else:
            other += size
    # Tied embeddings: llama.cpp places a copy of them with the output layer.
    tied = sizes.get("token_embd.weight", 0) if "output.weight" not in sizes else 0
    return ModelFacts(arch, n_layer, int(get("context_length", 0)), _kv_per_token(get, n_layer),
                      layer_bytes, output + tied, other, tied, metadata)


def _sizes(tensors: list, data_size: int) -> dict:
    ordered = sorted(tensors, key=lambda t: t[1])
    ends = [offset for _, offset in ordered[1:]] + [data_size]
    return {name: end - offset for (name, offset), end in zip(ordered, ends)}


def _kv_per_token(get, n_layer: int) -> int:
    n_embd, n_head = int(get("embedding_length")), int(get("attention.head_count", 1)) or 1
    heads_kv = get("attention.head_count_kv", n_head)
    per_layer = heads_kv if isinstance(heads_kv, list) else [heads_kv] * n_layer
    k = int(get("attention.key_length", n_embd // n_head))
    v = int(get("attention.value_length", n_embd // n_head))
    return sum(int(h) * (k + v) for h in per_layer[:n_layer]) * F16_BYTES
