"""The OpenAI API as clients use it, with the official `openai` client against one real
`chatdb serve`: the context's end, structured output, tools, logprobs, logit_bias, CORS,
/health, the paths without /v1, --alias, and the parameters refused rather than ignored."""

import json
import os
import subprocess

import httpx
import jsonschema
import openai
import pytest

from chatdb.archive import Archive

from ..chatdb_command import chatdb_argv, python_path
from ..polling import wait_until
from .conftest import ROOT, Server, chatdb_json

KEY = "api-key-21"
ORIGIN = "http://app.example"
# SmolLM2's end-of-generation tokens (<|endoftext|>, <|im_end|>, <reponame>) and <|im_start|>
NO_END = {"0": -100, "1": -100, "2": -100, "4": -100}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city now",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}},
                   "required": ["city"], "additionalProperties": False}}}
CLOCK = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a time zone",
    "parameters": {"type": "object", "properties": {"zone": {"enum": ["UTC", "CET", "PST"]}},
                   "required": ["zone"]}}}
ASK_WEATHER = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    served = Server(tmp_path_factory.mktemp("api") / "chatdb.db", "--ctx", "512", "--parallel", "4",
                    "--alias", "local-model", "--cors-origin", ORIGIN, env={"CHATDB_API_KEY": KEY})
    yield served
    served.stop()


@pytest.fixture(scope="module")
def api(server):
    return openai.OpenAI(base_url=server.base, api_key=KEY, max_retries=0, timeout=600)


def stored_kv(db, message_id: int) -> int:
    with Archive.open(db) as archive:
        return archive.conn.execute("SELECT count(*) FROM kv_segments WHERE message_id = ?",
                                    (message_id,)).fetchone()[0]


def greedy(api, messages, **fields):
    return api.chat.completions.create(model="any", messages=messages, temperature=0, **fields)


# -- the context's end -------------------------------------------------------------

LONG = [{"role": "user", "content": "Tell me all you know about ships. " * 43}]   # near the most that fits 512


def test_an_answer_that_runs_into_the_context_end_finishes_length(server, api):
    whole = greedy(api, LONG, max_tokens=2000, logit_bias=NO_END)
    assert whole.choices[0].finish_reason == "length" and whole.choices[0].message.content
    stored = Archive.open(server.db)
    with stored:
        message = stored.message(whole.chatdb["message_id"])
    assert message.content == whole.choices[0].message.content
    assert message.meta["finish"] == "context" and message.status == "complete"

    with httpx.stream("POST", server.base + "/chat/completions", timeout=600, headers=auth(), json={
            "model": "m", "messages": LONG, "temperature": 0, "max_tokens": 2000,
            "logit_bias": NO_END, "stream": True}) as streamed:
        lines = [line for line in streamed.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[len("data: "):]) for line in lines[:-1]]
    assert not any("error" in c for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text == whole.choices[0].message.content   # the same greedy answer, resent


# -- structured output -------------------------------------------------------------

SCHEMAS = {
    "nested": {"type": "object", "additionalProperties": False, "required": ["person"],
               "properties": {"person": {
                   "type": "object", "additionalProperties": False, "required": ["name", "age"],
                   "properties": {"name": {"type": "string", "maxLength": 24},
                                  "age": {"type": "integer", "minimum": 0, "maximum": 120}}}}},
    "enum": {"type": "object", "required": ["colour", "sure"], "additionalProperties": False,
             "properties": {"colour": {"enum": ["red", "green", "blue"]}, "sure": {"type": "boolean"}}},
    "array": {"type": "object", "required": ["fruits"], "additionalProperties": False,
              "properties": {"fruits": {"type": "array", "minItems": 1, "maxItems": 3,
                                        "items": {"type": "string", "maxLength": 16}}}},
}
QUESTIONS = {"nested": "Describe a person.", "enum": "Pick a colour.", "array": "Name some fruits."}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_json_schema_answers_parse_and_match(api, name):
    answer = greedy(api, [{"role": "user", "content": QUESTIONS[name]}], max_tokens=120,
                    response_format={"type": "json_schema", "json_schema": {
                        "name": name, "schema": SCHEMAS[name], "strict": True}})
    assert answer.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(answer.choices[0].message.content), SCHEMAS[name])


def test_json_object_streamed_parses(api):
    chunks = list(greedy(api, [{"role": "user", "content": "What is 2+2? Answer as a JSON object."}],
                         max_tokens=150, stream=True, seed=3,
                         response_format={"type": "json_object"}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].choices[0].finish_reason == "stop", text
    assert isinstance(json.loads(text), dict)


def test_the_sdk_parse_helper_gets_a_pydantic_object(api):
    """The openai SDK's chat.completions.parse: a pydantic model as the schema, strict."""
    from pydantic import BaseModel, Field

    class City(BaseModel):
        name: str = Field(max_length=20)
        country: str = Field(max_length=20)

    parsed = api.chat.completions.parse(model="m", temperature=0, max_tokens=80, response_format=City,
                                        messages=[{"role": "user", "content": "Name a city."}])
    city = parsed.choices[0].message.parsed
    assert isinstance(city, City) and city.name


# -- tools ---------------------------------------------------------------------------

def test_required_and_named_tool_calls_and_a_follow_up(server, api):
    answer = greedy(api, ASK_WEATHER, max_tokens=60, tools=[WEATHER, CLOCK],
                    tool_choice="required", parallel_tool_calls=False)
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.function.name in ("get_weather", "get_time") and call.id.startswith("call_")
    params = {"get_weather": WEATHER, "get_time": CLOCK}[call.function.name]["function"]["parameters"]
    jsonschema.validate(json.loads(call.function.arguments), params)

    named = greedy(api, ASK_WEATHER, max_tokens=60, tools=[WEATHER, CLOCK],
                   tool_choice={"type": "function", "function": {"name": "get_time"}})
    (call,) = named.choices[0].message.tool_calls
    assert call.function.name == "get_time"
    jsonschema.validate(json.loads(call.function.arguments), CLOCK["function"]["parameters"])

    history = ASK_WEATHER + [named.choices[0].message.model_dump(exclude_none=True),
                             {"role": "tool", "tool_call_id": call.id, "content": "12:30 CET"}]
    follow = greedy(api, history, max_tokens=24, tools=[WEATHER, CLOCK], tool_choice="none")
    assert follow.choices[0].finish_reason in ("stop", "length") and follow.choices[0].message.content
    assert follow.chatdb["reused_messages"] == 3      # the call was found as the model wrote it
    with Archive.open(server.db) as archive:
        path = archive.path(follow.chatdb["message_id"])
        assert [m.role for m in path] == ["system", "user", "assistant", "tool", "assistant"]
        assert "get_time" in path[0].content and '"name":"get_time"' in path[2].content
        assert path[3].content == "12:30 CET"
    wait_until(lambda: stored_kv(server.db, path[2].id), what="the tool call's KV stored")
    found = chatdb_json(server.db, "search", "CET")
    assert any(hit["message_id"] == path[3].id for hit in found)


def test_tool_calls_stream_as_openai_streams_them(api):
    whole = greedy(api, ASK_WEATHER, max_tokens=60, tools=[WEATHER], tool_choice="required",
                   parallel_tool_calls=False)
    chunks = list(greedy(api, ASK_WEATHER, max_tokens=60, tools=[WEATHER], tool_choice="required",
                         parallel_tool_calls=False, stream=True))
    deltas = [c.choices[0].delta.tool_calls for c in chunks if c.choices and c.choices[0].delta.tool_calls]
    head = deltas[0][0]
    assert head.index == 0 and head.id.startswith("call_") and head.type == "function"
    assert head.function.name == "get_weather" and head.function.arguments == ""
    fragments = [d[0].function.arguments for d in deltas[1:]]
    assert len(fragments) > 1 and all(d[0].index == 0 and d[0].id is None for d in deltas[1:])
    assert "".join(fragments) == whole.choices[0].message.tool_calls[0].function.arguments
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_auto_answers_in_text_or_holds_a_begun_call_to_its_schema(api):
    text = greedy(api, ASK_WEATHER, max_tokens=16, tools=[WEATHER])
    assert text.choices[0].message.content and not text.choices[0].message.tool_calls
    # SmolLM2 calls no tool of its own accord: a bias towards "<" (token 44) leads it to
    # open one, and from "<tool_call>" on the grammar holds it to the function's schema.
    called = greedy(api, ASK_WEATHER, max_tokens=60, tools=[WEATHER], parallel_tool_calls=False,
                    logit_bias={"44": 8})
    (call,) = called.choices[0].message.tool_calls
    assert called.choices[0].finish_reason == "tool_calls" and call.function.name == "get_weather"
    jsonschema.validate(json.loads(call.function.arguments), WEATHER["function"]["parameters"])


# -- logprobs and logit_bias -----------------------------------------------------------

def test_logprobs_greedy_picks_the_top_token(api):
    answer = greedy(api, [{"role": "user", "content": "Name a colour."}], max_tokens=8,
                    logprobs=True, top_logprobs=3)
    content = answer.choices[0].logprobs.content
    ended = answer.choices[0].finish_reason == "stop"     # by an end token, which has no entry
    assert len(content) == answer.usage.completion_tokens - ended
    for entry in content:
        assert len(entry.top_logprobs) == 3 and entry.logprob <= 0
        assert entry.top_logprobs[0].token == entry.token
        assert entry.top_logprobs[0].logprob == pytest.approx(entry.logprob)
    assert "".join(e.token for e in content).startswith(answer.choices[0].message.content)

    chunks = list(greedy(api, [{"role": "user", "content": "Name a colour."}], max_tokens=8,
                         logprobs=True, top_logprobs=3, stream=True))
    streamed = [e for c in chunks if c.choices and c.choices[0].logprobs
                for e in c.choices[0].logprobs.content]
    assert [e.token for e in streamed][:len(content)] == [e.token for e in content]


def test_frequency_and_presence_penalties_change_a_repetitive_answer(api):
    ask = [{"role": "user", "content": "Write the word cat ten times."}]
    plain = greedy(api, ask, max_tokens=24).choices[0].message.content
    for field in ("frequency_penalty", "presence_penalty"):
        penalised = greedy(api, ask, max_tokens=24, **{field: 2.0}).choices[0].message.content
        assert penalised.lower().count("cat") < plain.lower().count("cat"), (field, plain, penalised)


def test_logit_bias_keeps_a_token_out(api, smollm2_vocab):
    first = greedy(api, [{"role": "user", "content": "Name a colour."}], max_tokens=8, logprobs=True)
    token = first.choices[0].logprobs.content[0]
    token_id = api_token_id(token.bytes, smollm2_vocab)
    biased = greedy(api, [{"role": "user", "content": "Name a colour."}], max_tokens=8,
                    logprobs=True, logit_bias={str(token_id): -100})
    assert all(e.bytes != token.bytes for e in biased.choices[0].logprobs.content)


def api_token_id(piece: list, vocab) -> int:
    """The token id of a piece of SmolLM2's vocabulary (the archive's tokenizer)."""
    return next(t for t in range(vocab.n_vocab) if vocab.piece(t) == bytes(piece))


# -- HTTP conventions -----------------------------------------------------------------

def auth(key=KEY):
    return {"authorization": f"Bearer {key}"}


def test_a_preflight_needs_no_key_and_answers_carry_cors_headers(server):
    preflight = {"origin": ORIGIN, "access-control-request-method": "POST",
                 "access-control-request-headers": "authorization, content-type"}
    for path in ("/v1/chat/completions", "/chat/completions"):
        answered = httpx.options(server.root + path, headers=preflight, timeout=60)
        assert answered.status_code == 200
        assert answered.headers["access-control-allow-origin"] == ORIGIN
        assert "POST" in answered.headers["access-control-allow-methods"]
    with_key = httpx.options(server.root + "/v1/models", headers={**preflight, **auth()}, timeout=60)
    assert with_key.status_code == 200
    listed = httpx.get(server.root + "/v1/models", headers={"origin": ORIGIN, **auth()}, timeout=60)
    assert listed.headers["access-control-allow-origin"] == ORIGIN
    refused = httpx.get(server.root + "/v1/models", headers={"origin": ORIGIN}, timeout=60)
    assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == ORIGIN
    other = httpx.options(server.root + "/v1/models", timeout=60, headers={
        **preflight, "origin": "http://elsewhere.example"})
    assert "access-control-allow-origin" not in other.headers


def test_health_is_open_and_paths_work_without_v1(server):
    for path in ("/health", "/v1/health"):
        health = httpx.get(server.root + path, timeout=60)
        assert health.status_code == 200 and health.json()["model"] == "local-model"
    models = httpx.get(server.root + "/models", headers=auth(), timeout=60).json()
    assert [m["id"] for m in models["data"]] == ["local-model"]
    body = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2,
            "temperature": 0}
    answered = httpx.post(server.root + "/chat/completions", json=body, headers=auth(), timeout=600)
    assert answered.status_code == 200 and answered.json()["model"] == "local-model"


@pytest.mark.parametrize("field, value, param", [
    ("response_format", {"type": "sound"}, "response_format.type"),
    ("response_format", {"type": "json_schema"}, "response_format.json_schema"),
    ("response_format", {"type": "json_schema", "json_schema": {"name": "x", "schema": 3}},
     "response_format.json_schema.schema"),
    # found by the API's fuzzing: a json_schema beside type text was not read at all
    ("response_format", {"type": "text", "json_schema": {"name": "x", "description": False}},
     "response_format.json_schema.description"),
    ("response_format", {"type": "json_object", "json_schema": 3}, "response_format.json_schema"),
    ("tool_choice", "required", "tool_choice"),
    ("tool_choice", {"type": "function", "function": {"name": "nope"}}, "tool_choice"),
    ("top_logprobs", 3, "top_logprobs"),
    ("logit_bias", {"99999999": 5}, "logit_bias"),
    ("logit_bias", {"12": 500}, "logit_bias"),
    ("presence_penalty", 3, "presence_penalty"),
    ("functions", [{"name": "f"}], "functions"),
    ("audio", {"voice": "alloy"}, "audio"),
    ("reasoning_effort", "high", "reasoning_effort"),
    ("best_of", 2, "best_of"),
])
def test_what_would_change_the_answer_is_refused_naming_it(server, field, value, param):
    body = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, field: value}
    refused = httpx.post(server.base + "/chat/completions", json=body, headers=auth(), timeout=600)
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param


def test_a_schema_keyword_the_grammar_cannot_enforce_is_refused_naming_it(server):
    """Structured output holds by construction: a keyword the grammar would not enforce is
    a 400 naming it (and where), in response_format and in a tool's parameters alike."""
    count = {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 5}}}
    cases = [("response_format", {"type": "json_schema", "json_schema": {"name": "c", "schema": count}},
              "response_format.json_schema.schema", "'multipleOf' at n"),
             ("tools", [{"type": "function", "function": {"name": "mail", "parameters": {
                 "type": "object", "properties": {"to": {"type": "string", "format": "email"}}}}}],
              "tools[0].function.parameters", "'email' at to")]
    for field, value, param, said in cases:
        body = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2,
                field: value}
        refused = httpx.post(server.base + "/chat/completions", json=body, headers=auth(), timeout=600)
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["type"] == "invalid_request_error" and error["param"] == param
        assert said in error["message"]


def test_no_op_fields_are_accepted(server):
    body = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2,
            "temperature": 0, "user": "u1", "metadata": {"k": "v"}, "store": False,
            "service_tier": "auto", "modalities": ["text"], "parallel_tool_calls": True}
    assert httpx.post(server.base + "/chat/completions", json=body, headers=auth(),
                      timeout=600).status_code == 200


def test_a_context_below_the_floor_is_refused(db_path):
    done = subprocess.run(chatdb_argv("serve", "--db", db_path, "--port", "0", "--ctx", "256"),
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": python_path()},
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 2 and "at least 512" in done.stderr and not db_path.exists()


# -- n > 1 ----------------------------------------------------------------------------------

def test_n_answers_are_computed_together_and_stored_as_siblings(server, api):
    question = [{"role": "user", "content": "Name a colour, please."}]
    answer = api.chat.completions.create(model="m", messages=question, n=3, temperature=1.0,
                                         seed=7, max_tokens=12)
    assert [c.index for c in answer.choices] == [0, 1, 2]
    assert answer.chatdb["batch"]["most_sequences"] >= 3       # one pass held all three
    ids = answer.chatdb["message_ids"]
    with Archive.open(server.db) as archive:
        answers = [archive.message(i) for i in ids]
        question_id = answers[0].parent_id
        assert all(a.parent_id == question_id and a.role == "assistant" for a in answers)
        assert [a.content for a in answers] == [c.message.content for c in answer.choices]
        assert archive.message(question_id).content == question[0]["content"]
    # Repeatable: the same seed gives the same three answers, and the prompt is not re-added.
    again = api.chat.completions.create(model="m", messages=question, n=3, temperature=1.0,
                                        seed=7, max_tokens=12)
    assert [c.message.content for c in again.choices] == [c.message.content for c in answer.choices]
    assert again.chatdb["reused_messages"] == 1

    chunks = list(api.chat.completions.create(model="m", messages=question, n=2, temperature=1.0,
                                              seed=7, max_tokens=12, stream=True))
    texts = {}
    for chunk in chunks:
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
    assert texts == {0: answer.choices[0].message.content, 1: answer.choices[1].message.content}
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finishes) == 2


# -- /v1/completions -------------------------------------------------------------------------

def test_completions_streamed_and_not_and_not_archived(server, api):
    with Archive.open(server.db) as archive:
        before = archive.count_messages()
    whole = api.completions.create(model="m", prompt="The capital of France is", max_tokens=8,
                                   temperature=0, logprobs=2)
    choice = whole.choices[0]
    assert choice.text and choice.finish_reason in ("stop", "length")
    assert whole.object == "text_completion" and whole.usage.completion_tokens <= 8
    lp = choice.logprobs
    assert "".join(lp.tokens).startswith(choice.text) or choice.text.startswith("".join(lp.tokens))
    assert all(len(top) == 2 and max(top.values()) == pytest.approx(chosen)
               for top, chosen in zip(lp.top_logprobs, lp.token_logprobs))
    assert lp.text_offset[0] == 0
    streamed = list(api.completions.create(model="m", prompt="The capital of France is",
                                           max_tokens=8, temperature=0, stream=True))
    assert "".join(c.choices[0].text for c in streamed) == choice.text
    assert streamed[-1].choices[0].finish_reason == choice.finish_reason
    echoed = api.completions.create(model="m", prompt="The capital of France is", max_tokens=8,
                                    temperature=0, echo=True)
    assert echoed.choices[0].text == "The capital of France is" + choice.text
    with Archive.open(server.db) as archive:
        assert archive.count_messages() == before      # an editor's many completions add nothing


def test_completions_refuse_what_they_cannot_do(server):
    for body, param in [({"prompt": "def f(", "suffix": "return x"}, "suffix"),
                        ({"prompt": ["a", "b"]}, "prompt"),
                        ({"prompt": "x", "echo": True, "logprobs": 1}, "echo"),
                        ({"prompt": "x", "best_of": 3}, "best_of"),
                        ({"prompt": "x " * 600}, "prompt")]:
        refused = httpx.post(server.base + "/completions", json={"model": "m", **body},
                             headers=auth(), timeout=600)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["param"] == param


# -- another real client: LangChain ----------------------------------------------------------

def test_langchain_structured_output_and_tools(server):
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from pydantic import BaseModel, Field

    llm = ChatOpenAI(base_url=server.base, api_key=KEY, model="local-model", temperature=0,
                     max_tokens=60, max_retries=0, timeout=600)

    class Place(BaseModel):
        """A city and its country."""
        city: str = Field(max_length=20)
        country: str = Field(max_length=20)

    place = llm.with_structured_output(Place, method="json_schema", strict=True).invoke(
        "Name a city in France.")
    assert isinstance(place, Place) and place.city

    @tool
    def lookup_weather(city: str) -> str:
        """The weather in a city now."""
        return "Sunny, 21 C"

    question = HumanMessage("What is the weather in Lyon?")
    called = llm.bind_tools([lookup_weather], tool_choice="lookup_weather").invoke([question])
    (call,) = called.tool_calls
    assert call["name"] == "lookup_weather" and isinstance(call["args"].get("city"), str)
    # LangChain sends the call back re-serialised (json.dumps' spacing): the archive finds
    # the message the model wrote all the same, and adds the result and the answer.
    result = ToolMessage(content=lookup_weather.invoke(call["args"]), tool_call_id=call["id"])
    final = llm.bind_tools([lookup_weather], tool_choice="none").invoke([question, called, result])
    assert final.content
    with Archive.open(server.db) as archive:
        calls = archive.conn.execute("SELECT count(*) FROM messages WHERE role = 'assistant' AND "
                                     "content LIKE '%\"name\":\"lookup_weather\"%'").fetchone()[0]
        results = archive.conn.execute("SELECT count(*) FROM messages WHERE role = 'tool' AND "
                                       "content = 'Sunny, 21 C'").fetchone()[0]
    assert (calls, results) == (1, 1)
