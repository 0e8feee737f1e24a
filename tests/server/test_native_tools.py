"""Tools through the model's own template, end to end: a real `chatdb serve` on a tiny
random-weight model carrying Qwen2.5's chat template, the official openai client sending
tools with tool_choice "required" (the grammar forces a valid call, in the template's own
syntax, even from random weights), then the result as a `tool` message."""

import json

import jsonschema
import openai
import pytest

from chatdb.archive import Archive

from ..polling import wait_until
from .conftest import Server, chatdb_json

KEY = "api-key-21b"
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city now",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 20}, "unit": {"enum": ["C", "F"]}},
        "required": ["city", "unit"], "additionalProperties": False}}}
ASK = [{"role": "system", "content": "You are terse."},
       {"role": "user", "content": "What is the weather in Paris this week?"}]


@pytest.fixture(scope="module")
def server(tmp_path_factory, tools_model_path):
    served = Server(tmp_path_factory.mktemp("tools") / "chatdb.db", "--model", tools_model_path,
                    "--ctx", "2048", env={"CHATDB_API_KEY": KEY})
    yield served
    served.stop()


@pytest.fixture(scope="module")
def api(server):
    return openai.OpenAI(base_url=server.base, api_key=KEY, max_retries=0, timeout=600)


def test_a_call_and_its_result_in_the_templates_own_format(server, api):
    answer = api.chat.completions.create(model="any", messages=ASK, tools=[WEATHER],
                                         tool_choice="required", parallel_tool_calls=False,
                                         temperature=0, max_tokens=80)
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather"
    arguments = json.loads(call.function.arguments)
    jsonschema.validate(arguments, WEATHER["function"]["parameters"])
    with Archive.open(server.db) as archive:
        stored = archive.message(answer.chatdb["message_id"])
    # what the model wrote is the call as Qwen2.5's template writes it (json.dumps' spacing)
    assert stored.content == ('<tool_call>\n{"name": "get_weather", "arguments": '
                              + json.dumps(arguments, ensure_ascii=False) + "}\n</tool_call>")

    # the client sends the call back (re-serialised, compact) with the tool's result
    sent = {"role": "assistant", "content": None, "tool_calls": [{
        "id": call.id, "type": "function", "function": {
            "name": "get_weather", "arguments": json.dumps(arguments, separators=(",", ":"))}}]}
    history = ASK + [sent, {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 21 C"}]
    follow = api.chat.completions.create(model="any", messages=history, tools=[WEATHER],
                                         tool_choice="none", temperature=0, max_tokens=8)
    assert follow.choices[0].message.content is not None
    extra = follow.model_extra["chatdb"]
    assert extra["reused_messages"] == 3             # system, question and the call, found again
    assert extra["conversation_id"] == answer.chatdb["conversation_id"]
    # the call's KV is reused: only the result and the answer's opening are computed
    assert extra["restored_tokens"] > 0 and extra["computed_tokens"] < extra["restored_tokens"]
    assert extra["restored_tokens"] + extra["computed_tokens"] == follow.usage.prompt_tokens

    with Archive.open(server.db) as archive:
        path = archive.path(follow.chatdb["message_id"])
        assert [m.role for m in path] == ["system", "user", "assistant", "tool", "assistant"]
        assert path[2].id == stored.id and path[3].content == "Sunny, 21 C"
        assert "get_weather" in path[0].content
    found = {hit["message_id"] for hit in chatdb_json(server.db, "search", "get_weather")}
    assert stored.id in found                         # the call, by its function's name
    wait_until(lambda: _stored_kv(server.db, stored.id), what="the call's KV stored")


def _stored_kv(db, message_id: int) -> int:
    with Archive.open(db) as archive:
        return archive.conn.execute("SELECT count(*) FROM kv_segments WHERE message_id = ?",
                                    (message_id,)).fetchone()[0]


def test_a_streamed_call_in_the_templates_syntax(api):
    fields = dict(model="any", messages=ASK, tools=[WEATHER], tool_choice="required",
                  parallel_tool_calls=False, temperature=0, max_tokens=80)
    whole = api.chat.completions.create(**fields).choices[0].message.tool_calls[0]
    chunks = list(api.chat.completions.create(stream=True, **fields))
    deltas = [c.choices[0].delta.tool_calls[0] for c in chunks
              if c.choices and c.choices[0].delta.tool_calls]
    assert deltas[0].function.name == "get_weather" and deltas[0].id.startswith("call_")
    assert "".join(d.function.arguments or "" for d in deltas) == whole.function.arguments
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
