"""The API fuzzed from its own OpenAPI document (Schemathesis) against a real server.

Bodies as the document allows them and bodies it does not (wrong types, missing
and unknown fields, out-of-range numbers), and requests without the key: no
answer is a 500, none hangs, every 4xx is in the OpenAI error shape and matches
the document, and a refused request leaves the archive as it was. Answers are
kept short (max_tokens at most 4): what is fuzzed is the API, not the model.
The suite runs a bounded number of cases; bench/fuzz_api.py runs many more.
"""

import os
import sqlite3

import httpx
import pytest
import schemathesis
from hypothesis import settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from server import openapi

from .conftest import Server

pytestmark = pytest.mark.timeout(300)

# The coverage phase sends every boundary case of every field (hundreds an operation,
# whatever max_examples says): for the bench (CHATDB_FUZZ_COVERAGE=1). The suite generates
# the Hypothesis profile's number of cases an operation.
COVERAGE = os.environ.get("CHATDB_FUZZ_COVERAGE") == "1"
PHASES = {"coverage": {"enabled": COVERAGE}, "stateful": {"enabled": False}}
KEY = "fuzz-admin-key"
SCHEMA = schemathesis.openapi.from_dict(openapi.document(), config=schemathesis.Config.from_dict(
    {"phases": PHASES, "auth": {"openapi": {"bearer": {"bearer": KEY}}}}))
LONGEST = 4
# Schema-valid bodies the server still refuses, and says why: tool_choice without
# tools, n above --parallel, a grammar the model's vocabulary cannot follow.
EXCLUDED = [positive_data_acceptance]


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory):
    where = tmp_path_factory.mktemp("fuzz")
    (where / "keys").write_text(f"fuzz {KEY} admin\nother other-key\n")
    server = Server(where / "chatdb.db", "--keys", where / "keys", "--parallel", "2",
                    "--ctx", "512", "--queue", "64")
    yield server
    assert server.stop() == 0


def archive_counts(db) -> tuple:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT (SELECT count(*) FROM conversations), "
                            "(SELECT count(*) FROM messages)").fetchone()


def short(case) -> None:
    """Keep a generated answer short: its length is the model's business, not the API's."""
    if isinstance(case.body, dict):
        for key in ("max_tokens", "max_completion_tokens"):
            value = case.body.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > LONGEST:
                case.body[key] = LONGEST
        if "max_tokens" not in case.body and "max_completion_tokens" not in case.body:
            case.body["max_tokens"] = LONGEST


def test_found_a_last_message_too_long_for_the_context_was_decoded(fuzzed):
    """Found by this fuzzing: a path ending in an answer longer than the context (here an
    assistant message of tool calls) went to llama_decode, and the client got a 500."""
    before = archive_counts(fuzzed.db)
    calls = [{"id": f"call_{i}", "type": "function",
              "function": {"name": f"tool_{i}", "arguments": "{\"x\": " + "9" * 80 + "}"}}
             for i in range(12)]
    body = {"messages": [{"role": "assistant", "content": None, "tool_calls": calls}],
            "max_tokens": 4}
    response = httpx.post(fuzzed.base + "/chat/completions", json=body, timeout=60,
                          headers={"authorization": f"Bearer {KEY}"})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "context_length_exceeded"
    assert archive_counts(fuzzed.db) == before


@pytest.mark.parametrize("name", ["local-model", "org/some-model.gguf", "p%0Aq", "%F1%AF%B4%BA"])
def test_found_a_model_name_with_a_newline_was_not_found(fuzzed, name):
    """Found by bench/fuzz_api.py: any name is the model served, but one holding a newline
    did not reach the route (a 404, which the document does not give)."""
    response = httpx.get(f"{fuzzed.base}/models/{name}", timeout=60,
                         headers={"authorization": f"Bearer {KEY}"})
    assert response.status_code == 200, response.text
    assert response.json()["object"] == "model"


def check_error_shape(response) -> None:
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert isinstance(error["message"], str) and error["message"]


def test_found_an_empty_completion_prompt_hung_its_slot(fuzzed):
    """Found by this fuzzing: with no BOS, "" is no token, and the slot waited forever."""
    body = {"prompt": "", "max_tokens": 4}
    response = httpx.post(fuzzed.base + "/completions", json=body, timeout=60,
                          headers={"authorization": f"Bearer {KEY}"})
    assert response.status_code == 400 and response.json()["error"]["param"] == "prompt"


@SCHEMA.parametrize()
@settings(deadline=None)
def test_the_api_fuzzed_from_its_schema(case, fuzzed):
    short(case)
    before = archive_counts(fuzzed.db)
    response = case.call(base_url=fuzzed.root, timeout=60)   # the key: SCHEMA's auth
    case.validate_response(response, excluded_checks=EXCLUDED)
    if response.status_code >= 400:
        check_error_shape(response)
        assert archive_counts(fuzzed.db) == before, response.text
