"""POST /v1/embeddings: the OpenAI embeddings API, from chatdb's own embedding model.

Clients that index documents (editors, RAG tools, `llm embed`) send here.
`input` is a string or a list of strings (token arrays belong to another
model's tokenizer and are refused); `encoding_format` float or base64;
`dimensions`, if given, must be the model's. A text longer than the
model's longest sequence is refused, as OpenAI refuses one past its
context. Any `model` name is answered by the loaded embedding model.
"""

import base64
import threading

import anyio
import numpy as np
from starlette.requests import Request
from starlette.responses import JSONResponse

from . import fields
from .errors import APIError, bad_field

MAX_INPUTS = 2048   # OpenAI's own limit on one request's inputs
HONOURED = {"input", "model", "encoding_format", "dimensions"}


class EmbeddingService:
    """The embedding model, loaded at the first request; one forward pass at a time."""

    def __init__(self, embed_path, name: str):
        self.embed_path, self.name = embed_path, name
        self._model = None
        self._lock = threading.Lock()

    def model(self):
        with self._lock:
            if self._model is None:
                from engine.embed.model import EmbeddingModel

                self._model = EmbeddingModel(str(self.embed_path))
            return self._model

    def close(self) -> None:
        if self._model is not None:
            self._model.close()


def route(service: "EmbeddingService | None", json_body):
    """The handler; `json_body(request)` parses a body as the other routes do."""

    async def embeddings(request: Request):
        if service is None:
            raise APIError(404, "embeddings are off on this server (--embed-model off)",
                           type="not_found_error", code="model_not_found")
        req = await json_body(request)
        texts, encoding = parse(req)
        model = service.model()
        check_dimensions(req, model.dims)
        vectors, used = await anyio.to_thread.run_sync(lambda: embed(model, texts))
        data = [{"object": "embedding", "index": i, "embedding": encode(v, encoding)}
                for i, v in enumerate(vectors)]
        return JSONResponse({"object": "list", "data": data, "model": req.get("model") or service.name,
                             "usage": {"prompt_tokens": used, "total_tokens": used}})

    return embeddings


def parse(req) -> "tuple[list[str], str]":
    if not isinstance(req, dict):
        raise APIError(400, "the request body must be a JSON object", code="invalid_json")
    fields.check_known(req, HONOURED, {})
    if "input" not in req:
        raise bad_field("input", "'input' is required", code="missing_required_parameter")
    texts = req["input"]
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not texts:
        raise bad_field("input", "'input' must be a string or a non-empty list of strings")
    if len(texts) > MAX_INPUTS:
        raise bad_field("input", f"'input' has {len(texts):,} items; at most {MAX_INPUTS} are allowed")
    if not all(isinstance(t, str) for t in texts):
        raise bad_field("input", "'input' must hold strings: token arrays are not supported "
                        "(they belong to another model's tokenizer)")
    encoding = req.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        raise bad_field("encoding_format", "'encoding_format' must be 'float' or 'base64'")
    return texts, encoding


def embed(model, texts: list[str]) -> "tuple[np.ndarray, int]":
    sequences = [model.tokens_whole(t) for t in texts]
    for i, tokens in enumerate(sequences):
        if tokens is None:
            raise bad_field("input", f"input {i} is longer than the embedding model's "
                            f"{model.max_tokens} tokens", code="context_length_exceeded")
    return model.embed_tokens(sequences), sum(len(s) for s in sequences)


def check_dimensions(req, dims: int) -> None:
    asked = req.get("dimensions")
    if asked is not None and asked != dims:
        raise bad_field("dimensions", f"this embedding model gives {dims} dimensions, not {asked}")


def encode(vector: np.ndarray, encoding: str):
    if encoding == "base64":
        return base64.b64encode(vector.astype("<f4").tobytes()).decode()
    return [round(float(x), 7) for x in vector]
