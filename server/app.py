"""The routes: /v1/chat/completions, /v1/embeddings, /v1/models, /health (each also without /v1)."""

import json
import logging
import time
from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from engine.llama.sampling import SamplingSettings

from . import chat_request, chat_response, embeddings
from .bridge import first_or_disconnect, submit
from .chat_turn import chat_turn
from .errors import STATUS_TYPES, APIError, error_response
from .guard import Guard
from .tool_stream import ToolStream

log = logging.getLogger("chatdb.server")


@dataclass
class ServerConfig:
    model_name: str
    sampling: SamplingSettings        # defaults for fields a request leaves out
    api_key: "str | None" = None
    max_body: int = 4 << 20
    parallel: int = 1
    cors_origins: tuple = ()          # origins whose pages may call the API (none by default)
    n_vocab: int = 0
    embeddings: "embeddings.EmbeddingService | None" = None   # /v1/embeddings; None: off


def build_app(turns, config: ServerConfig):
    """The ASGI application; `turns` answers Turns (engine.batching.scheduler.SlotScheduler)."""
    started = int(time.time())

    async def completions(request: Request):
        req = chat_request.parse(await _json(request))
        turn = chat_turn(req, config.sampling, config.n_vocab, _client(request, req))
        ticket = submit(turns, turn)
        first = await first_or_disconnect(ticket, request.receive)
        if first is None:
            return Response(status_code=499)  # the client has gone: nobody reads this
        completion = chat_response.Completion(config.model_name)
        if req.stream:
            return StreamingResponse(_events(ticket, first, completion, req),
                                     media_type="text/event-stream",
                                     headers={"cache-control": "no-cache", "x-accel-buffering": "no"})
        outcome = await _outcome(ticket, first)
        return JSONResponse(completion.whole([outcome], req.tool_choice.takes_calls, req.logprobs),
                            headers=chat_response.headers([outcome]))

    async def models(request: Request):
        return JSONResponse({"object": "list", "data": [_model_card(config.model_name, started)]})

    async def model(request: Request):
        # With one model loaded, any name is served by it (as llama.cpp's server does).
        return JSONResponse(_model_card(config.model_name, started))

    async def health(request: Request):
        return JSONResponse({"status": "ok", "model": config.model_name,
                             "parallel": config.parallel, "busy": turns.busy,
                             "most_sequences": turns.most_sequences, "threads": turns.threads})

    routes = []
    for prefix in ("/v1", ""):    # several clients leave /v1 out of their base URL
        routes += [Route(f"{prefix}/chat/completions", completions, methods=["POST"]),
                   Route(f"{prefix}/embeddings", embeddings.route(config.embeddings, _json),
                         methods=["POST"]),
                   Route(f"{prefix}/models", models, methods=["GET"]),
                   Route(f"{prefix}/models/{{name:path}}", model, methods=["GET"]),
                   Route(f"{prefix}/health", health, methods=["GET"])]
    app = Starlette(routes=routes, exception_handlers={
        APIError: _api_error, HTTPException: _http_error, Exception: _fault})
    guarded = Guard(app, config.api_key, config.max_body)
    if not config.cors_origins:
        return guarded
    # Outside the key check: a browser's preflight carries no key, and the
    # answers (a 401 included) must carry the headers the page needs to read them.
    return CORSMiddleware(guarded, allow_origins=list(config.cors_origins),
                          allow_methods=["GET", "POST", "OPTIONS"], allow_headers=["*"],
                          expose_headers=["x-chatdb-conversation", "x-chatdb-restored-tokens",
                                          "x-chatdb-kv-source", "retry-after"], max_age=600)


async def _outcome(ticket, first):
    kind, value = first
    while kind != "done":
        kind, value = await ticket.next()
    return value


async def _events(ticket, first, completion, req):
    """Server-sent events: a role chunk, content (or tool call) chunks, the finish, usage, [DONE]."""
    tools = ToolStream() if req.tool_choice.takes_calls else None
    pending: list = []            # log-probabilities of tokens whose text has not gone yet
    try:
        yield _sse(completion.chunk({"role": "assistant", "content": ""}))
        kind, value = first
        while kind != "done":
            if kind == "logprob":
                pending.append(chat_response.logprob_entry(value))
            else:
                for delta in (tools.feed(value) if tools else [{"content": value}]):
                    yield _sse(completion.chunk(delta, logprobs=pending if req.logprobs else None))
                    pending = []
            kind, value = await ticket.next()
        for delta in (tools.close() if tools else []):
            yield _sse(completion.chunk(delta))
        called = bool(tools and tools.calls)
        yield _sse(completion.chunk({}, chat_response.finish_reason(value.result, called)))
        if req.include_usage:
            yield _sse(completion.usage_chunk([value]))
        yield "data: [DONE]\n\n"
    except APIError as exc:
        yield _sse({"error": {"message": exc.message, "type": exc.type, "param": exc.param,
                              "code": exc.code}})
    finally:
        ticket.cancel()  # the client went away mid-answer: stop it, keep what was written


def _sse(value: dict) -> str:
    return f"data: {json.dumps(value, ensure_ascii=False)}\n\n"


async def _json(request: Request):
    body = await request.body()
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise APIError(400, f"the request body is not valid JSON: {exc}", code="invalid_json") from None


def _client(request: Request, req) -> str:
    return req.user or request.headers.get("user-agent") or "unknown"


def _model_card(name: str, created: int) -> dict:
    return {"id": name, "object": "model", "created": created, "owned_by": "chatdb"}


async def _api_error(request, exc: APIError):
    return exc.response()


async def _http_error(request, exc: HTTPException):
    return error_response(exc.status_code, str(exc.detail),
                          type=STATUS_TYPES.get(exc.status_code, "invalid_request_error"),
                          headers=getattr(exc, "headers", None))


async def _fault(request, exc: Exception):
    log.error("chatdb serve: %s: %s", type(exc).__name__, exc)
    return error_response(500, f"internal error ({type(exc).__name__})", type="server_error",
                          code="internal_error")
