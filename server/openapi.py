"""The server's OpenAPI document (GET /openapi.json): every endpoint and every field it honours.

Written as data, beside the parsers it describes: a test keeps each body's
properties equal to what its parser honours (chat_request.HONOURED,
completion_request.HONOURED, embeddings.HONOURED, and the fields accepted as
no-ops), and Schemathesis fuzzes a real server from it. A body may hold no
other field: the server refuses an unknown one with a 400 rather than ignore
it. Every route is served under /v1 and without it; the document lists the
/v1 forms (and /health, /openapi.json as they are).
"""

from chatdb.tags import MAX_TAG

from . import chat_request, completion_request, embeddings, fields

VERSION = "3.0.3"


def _int(low=None, high=None, **more) -> dict:
    out = {"type": "integer", **more}
    if low is not None:
        out["minimum"] = low
    if high is not None:
        out["maximum"] = high
    return out


def _num(low, high) -> dict:
    return {"type": "number", "minimum": low, "maximum": high}


STRING, BOOL, OBJECT = {"type": "string"}, {"type": "boolean"}, {"type": "object"}
NULL_STRING = {"type": "string", "nullable": True}

ERROR = {"type": "object", "required": ["error"], "properties": {"error": {
    "type": "object", "required": ["message", "type", "param", "code"],
    "properties": {"message": STRING, "type": STRING, "param": NULL_STRING, "code": NULL_STRING}}}}

# Both generating endpoints' sampling fields (fields.sampling), with the ranges it checks.
SAMPLING = {
    "temperature": _num(0, 2), "top_p": _num(0, 1), "top_k": _int(0), "min_p": _num(0, 1),
    "repeat_penalty": _num(0, 10), "seed": _int(),
    "stop": {"oneOf": [STRING, {"type": "array", "items": STRING, "maxItems": fields.MAX_STOPS}]},
    "logit_bias": {"type": "object", "additionalProperties": _num(-100, 100)},
    "presence_penalty": _num(-2, 2), "frequency_penalty": _num(-2, 2),
}
# Accepted, changing nothing (fields.NO_OPS).
NO_OPS = {"user": STRING, "metadata": OBJECT, "store": BOOL, "service_tier": STRING,
          "prompt_cache_key": STRING, "safety_identifier": STRING}
STREAM_OPTIONS = {"type": "object", "properties": {"include_usage": BOOL}}

TEXT_PART = {"type": "object", "required": ["type", "text"],
             "properties": {"type": {"type": "string", "enum": ["text"]}, "text": STRING}}
TOOL_CALL = {"type": "object", "required": ["function"], "properties": {
    "id": STRING, "type": {"type": "string", "enum": ["function"]},
    "function": {"type": "object", "required": ["name"],
                 "properties": {"name": STRING, "arguments": STRING}}}}
MESSAGE = {"type": "object", "required": ["role"], "properties": {
    "role": {"type": "string", "enum": sorted(chat_request.ROLES)},
    "content": {"nullable": True, "oneOf": [STRING, {"type": "array", "items": TEXT_PART}]},
    "tool_calls": {"type": "array", "items": TOOL_CALL},
    "tool_call_id": STRING}}
TOOL = {"type": "object", "required": ["type", "function"], "properties": {
    "type": {"type": "string", "enum": ["function"]},
    "function": {"type": "object", "required": ["name"], "properties": {
        "name": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
        "description": STRING, "parameters": OBJECT, "strict": BOOL}}}}
RESPONSE_FORMAT = {"type": "object", "required": ["type"], "properties": {
    "type": {"type": "string", "enum": ["text", "json_object", "json_schema"]},
    "json_schema": {"type": "object", "required": ["name"], "properties": {
        "name": {"type": "string", "minLength": 1}, "schema": OBJECT,
        "strict": {**BOOL, "nullable": True}, "description": NULL_STRING}}}}
TOOL_CHOICE = {"oneOf": [
    {"type": "string", "enum": ["none", "auto", "required"]},
    {"type": "object", "required": ["type", "function"], "properties": {
        "type": {"type": "string", "enum": ["function"]},
        "function": {"type": "object", "required": ["name"], "properties": {"name": STRING}}}}]}

# chatdb's own part of a chat request: tags for the conversation it lands in (chatdb.tags
# checks each name further: no control characters, no lone surrogate).
CHATDB = {"type": "object", "additionalProperties": False, "properties": {
    "tags": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": MAX_TAG}}}}


def _body(required: str, properties: dict) -> dict:
    """A request body: `required` and the fields it may hold, each other one nullable (the
    server reads a null as the field left out)."""
    return {"type": "object", "required": [required], "additionalProperties": False,
            "properties": {name: schema if name == required else {**schema, "nullable": True}
                           for name, schema in properties.items()}}


CHAT = _body("messages", {
    "model": STRING,
    "messages": {"type": "array", "minItems": 1, "items": MESSAGE},
    "stream": BOOL, "stream_options": STREAM_OPTIONS,
    "max_tokens": _int(1), "max_completion_tokens": _int(1),
    "n": _int(1, chat_request.MOST_N),
    "response_format": RESPONSE_FORMAT,
    "tools": {"type": "array", "items": TOOL}, "tool_choice": TOOL_CHOICE,
    "parallel_tool_calls": BOOL,
    "logprobs": BOOL, "top_logprobs": _int(0, chat_request.MOST_TOP_LOGPROBS),
    "chatdb": CHATDB, **SAMPLING, **NO_OPS})

COMPLETION = _body("prompt", {
    "model": STRING,
    "prompt": {"oneOf": [STRING, {"type": "array", "items": STRING, "minItems": 1, "maxItems": 1}]},
    "suffix": STRING, "max_tokens": _int(1), "n": _int(1, 8), "best_of": _int(1, 8),
    "stream": BOOL, "stream_options": STREAM_OPTIONS,
    "logprobs": _int(0, completion_request.MOST_LOGPROBS), "echo": BOOL,
    **SAMPLING, **NO_OPS})

EMBEDDING = _body("input", {
    "input": {"oneOf": [STRING, {"type": "array", "items": STRING, "minItems": 1,
                                 "maxItems": embeddings.MAX_INPUTS}]},
    "model": STRING, "encoding_format": {"type": "string", "enum": ["float", "base64"]},
    "dimensions": _int(1), **NO_OPS})

# What a body's parser honours, by path: the test that keeps this document true reads it.
BODIES = {"/v1/chat/completions": CHAT, "/v1/completions": COMPLETION,
          "/v1/embeddings": EMBEDDING}


def _answers(ok: dict, *statuses: int) -> dict:
    out = {"200": {"description": "the answer", "content": {"application/json": {"schema": ok}}}}
    for status in statuses:
        out[str(status)] = {"description": "an error, in the OpenAI shape",
                            "content": {"application/json": {"schema": ERROR}}}
    return out


GENERATING = (400, 401, 408, 413, 429, 503)   # 503: every slot and queue place taken
ANSWER = {"type": "object", "required": ["id", "object", "choices"]}
# Each event's data: a chunk object, or [DONE] at the end.
STREAMED = {"description": "stream: true: server-sent events, one chunk each, then [DONE]",
            "content": {"text/event-stream": {"schema": {}}}}


def _post(summary: str, body: dict, *statuses: int) -> dict:
    answers = _answers(ANSWER, *statuses)
    answers["200"]["content"]["text/event-stream"] = STREAMED["content"]["text/event-stream"]
    return {"post": {"summary": summary, "requestBody": {
        "required": True, "content": {"application/json": {"schema": body}}},
        "responses": answers}}


def _get(summary: str, *statuses: int, open_: bool = False, parameters=None) -> dict:
    operation = {"summary": summary, "responses": _answers(OBJECT, *statuses)}
    if open_:
        operation["security"] = []
    if parameters:
        operation["parameters"] = parameters
    return {"get": operation}


def document() -> dict:
    name = [{"name": "name", "in": "path", "required": True, "schema": STRING}]
    return {
        "openapi": VERSION,
        "info": {"title": "chatdb serve", "version": "1",
                 "description": "The OpenAI API, answered from a chatdb archive. Every path "
                                "is served with and without /v1."},
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
                       "schemas": {"Error": ERROR}},
        "security": [{"bearer": []}],
        "paths": {
            "/v1/chat/completions": _post("a chat answer, its messages matched in the archive",
                                          CHAT, *GENERATING),
            "/v1/completions": _post("a raw prompt's completion (not archived)", COMPLETION,
                                     *GENERATING),
            "/v1/embeddings": _post("embeddings from the search model", EMBEDDING,
                                    400, 401, 404, 408, 413, 429),
            "/v1/models": _get("the model served", 401),
            "/v1/models/{name}": _get("the model served, under any name", 401, parameters=name),
            "/v1/stats": _get("each key's requests and tokens (an admin key)", 401, 403),
            "/health": _get("the model and how busy the server is", open_=True),
            "/openapi.json": _get("this document", open_=True),
        },
    }
