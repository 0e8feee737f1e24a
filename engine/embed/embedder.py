"""Messages and queries as vectors: an embedding model, how messages are chunked, and the
fingerprint that names the index they make.

    embedder = Embedder.open(archive)                 # the default model, else --embed-model
    vectors = embedder.embed_query("that flaky upload fix")
    chunks = embedder.embed_messages([(12, "Retry the S3 multipart PUT on timeout")])

The fingerprint covers the model file and everything that shapes a vector
(chunk size, pooling, normalisation): vectors made under another
fingerprint belong to another index and are never compared with these.
"""

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from chatdb.storage import dbapi

from ..kv.fingerprint import file_fingerprint
from ..machine import hardware
from .chunks import CHUNK_TOKENS, chunk_text
from .model import EmbeddingModel
from .model_path import resolve_embed_path

FORMAT = 1  # bump when what a vector means changes (chunking, pooling, normalisation)


@dataclass(frozen=True)
class MessageVectors:
    message_id: int
    starts: list[int]        # each chunk's first character in the message
    vectors: np.ndarray      # (chunks, dims) unit vectors; no rows for a blank message


def has_gpu() -> bool:
    report = hardware.detect()
    return report.gpu_offload and bool(report.gpus)


def embedding_fingerprint(path: "str | Path", cache=None) -> str:
    """The index's name for the model file at `path` (its file hash remembered in the
    archive when `cache` can be written)."""
    try:
        model = file_fingerprint(path, cache)
    except dbapi.Error:  # a read-only archive: hash it again each time
        model = file_fingerprint(path)
    blob = json.dumps({"model": model, "chunk_tokens": CHUNK_TOKENS, "format": FORMAT})
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


class Embedder:
    def __init__(self, model: EmbeddingModel, fingerprint: str):
        self.model, self.fingerprint = model, fingerprint
        self.name = Path(model.path).name
        self.dims = model.dims
        self.chunk_tokens = min(CHUNK_TOKENS, model.max_tokens)

    @classmethod
    def open(cls, archive, explicit: "str | None" = None, threads: int = 1,
             required: bool = True, queries_only: bool = False) -> "Embedder | None":
        """The embedding model chosen (--embed-model, CHATDB_EMBED_MODEL, else the
        default); None when turned off, or not installed and not `required`.
        `queries_only`: one short sequence per pass (a smaller compute buffer)."""
        path = resolve_embed_path(explicit, required)
        if path is None:
            return None
        fingerprint = embedding_fingerprint(path, archive.fingerprints if archive else None)
        size = {"batch_tokens": 0, "max_seq": 1} if queries_only else {}
        return cls(EmbeddingModel(str(path), threads, gpu=has_gpu(), **size), fingerprint)

    def embed_query(self, text: str) -> np.ndarray:
        """One unit vector for a search query (cut to the model's longest sequence)."""
        return self.model.embed([text])[0]

    def embed_messages(self, messages: "list[tuple[int, str]]") -> list[MessageVectors]:
        """Each message's chunk vectors; all the chunks of a batch share forward passes."""
        cut = [chunk_text(text, self.model.count_tokens, self.chunk_tokens) for _, text in messages]
        flat = [chunk.text for chunks in cut for chunk in chunks]
        vectors = self.model.embed(flat) if flat else np.empty((0, self.dims), np.float32)
        out, at = [], 0
        for (message_id, _), chunks in zip(messages, cut):
            out.append(MessageVectors(message_id, [c.start for c in chunks],
                                      vectors[at:at + len(chunks)]))
            at += len(chunks)
        return out

    def close(self) -> None:
        self.model.close()
