"""POST /v1/embeddings from a real `chatdb serve`, and the chats it writes indexed by meaning."""

import base64

import numpy as np
import openai
import pytest

from chatdb.archive import Archive
from chatdb.search.vectors import VectorStore

from ..polling import wait_until


@pytest.mark.timeout(600)
def test_embeddings_in_the_openai_shape(start_server, db_path, embedder):
    server = start_server()
    api = openai.OpenAI(base_url=server.base, api_key="unused", max_retries=0)
    texts = ["retry the upload on timeout", "a recipe for banana bread"]
    reply = api.embeddings.create(model="anything", input=texts)
    assert [d.index for d in reply.data] == [0, 1]
    got = np.array([d.embedding for d in reply.data], np.float32)
    assert got.shape == (2, embedder.dims)
    assert np.allclose(got, embedder.model.embed(texts), atol=1e-4)  # the same model as search's
    assert reply.usage.prompt_tokens == sum(len(embedder.model.tokens(t)) for t in texts)

    raw = server.post("/v1/embeddings", {"input": "one", "encoding_format": "base64"}).json()
    decoded = np.frombuffer(base64.b64decode(raw["data"][0]["embedding"]), "<f4")
    assert np.allclose(decoded, embedder.model.embed(["one"])[0], atol=1e-4)

    for body, param in [({"input": [1, 2, 3]}, "input"), ({}, "input"), ({"input": []}, "input"),
                        ({"input": "x", "dimensions": 7}, "dimensions"),
                        ({"input": "x", "encoding_format": "int8"}, "encoding_format"),
                        ({"input": "word " * 600}, "input")]:
        response = server.post("/v1/embeddings", body)
        assert response.status_code == 400, body
        assert response.json()["error"]["param"] == param

    server.chat([{"role": "user", "content": "Name a quiet beach in Portugal."}])

    def indexed():
        with Archive.open(db_path) as archive:
            store = VectorStore(archive.conn)
            model_id = store.model_id(embedder.fingerprint)
            return model_id is not None and store.count_unindexed(model_id) == 0
    wait_until(indexed, timeout=120, what="the served chat embedded")
