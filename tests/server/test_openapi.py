"""/openapi.json is kept in step with the request parsers: each body lists exactly the fields
its parser honours (and the no-ops), and every route the app serves is described."""

import re

import httpx
import pytest
import schemathesis

from engine.llama.sampling import SamplingSettings
from server import chat_request, completion_request, embeddings, fields, openapi
from server.app import ServerConfig, build_app

HONOURED = {"/v1/chat/completions": chat_request.HONOURED,
            "/v1/completions": completion_request.HONOURED,
            "/v1/embeddings": embeddings.HONOURED}


@pytest.mark.parametrize("path", sorted(HONOURED))
def test_each_body_lists_what_its_parser_honours(path):
    body = openapi.BODIES[path]
    assert set(body["properties"]) == HONOURED[path] | fields.NO_OPS
    assert body["additionalProperties"] is False     # any other field is refused, and said
    assert openapi.document()["paths"][path]["post"]["requestBody"]["content"][
        "application/json"]["schema"] is body


def test_every_route_is_described():
    app = build_app(None, ServerConfig("m", SamplingSettings()))
    served = {re.sub(r":\w+}", "}", route.path) for route in app.app.routes}   # {name:any}
    # Each route is served with /v1 and without; the document lists /health as it is.
    as_listed = {"/health" if p.endswith("/health") else p if p.startswith(("/v1", "/openapi"))
                 else "/v1" + p for p in served}
    document = openapi.document()
    assert as_listed == set(document["paths"])
    operations = list(schemathesis.openapi.from_dict(document).get_all_operations())
    assert len(operations) == sum(len(methods) for methods in document["paths"].values())


def test_the_server_serves_it_without_a_key(start_server):
    server = start_server(env={"CHATDB_API_KEY": "k"})
    document = httpx.get(server.root + "/openapi.json", timeout=30)
    assert document.status_code == 200 and document.json() == openapi.document()
