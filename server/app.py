"""The routes: /v1/chat/completions, /v1/models, /health."""

import json
import logging
import time
from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from engine.llama.sampling import SamplingSettings
from engine.batching.turns import Turn

from . import chat_request, chat_response
from .bridge import first_or_disconnect, submit
from .errors import STATUS_TYPES, APIError, error_response
from .guard import Guard

log = logging.getLogger("chatdb.server")


@dataclass
class ServerConfig:
    model_name: str
    sampling: SamplingSettings        # defaults for fields a request leaves out
    api_key: "str | None" = None
    max_body: int = 4 << 20
    parallel: int = 1


def build_app(turns, config: ServerConfig):
    """The ASGI application; `turns` answers Turns (engine.batching.scheduler.SlotScheduler)."""
    started = int(time.time())

    async def completions(request: Request):
        req = chat_request.parse(await _json(request))
        turn = Turn(messages=req.messages, sampling=_sampling(config.sampling, req), stop=req.stop,
                    title=_title(req.messages),
                    meta={"client": _client(request, req), "via": "chatdb serve"})
        ticket = submit(turns, turn)
        first = await first_or_disconnect(ticket, request.receive)
        if first is None:
            return Response(status_code=499)  # the client has gone: nobody reads this
        completion = chat_response.Completion(config.model_name)
        if req.stream:
            return StreamingResponse(_events(ticket, first, completion, req.include_usage),
                                     media_type="text/event-stream",
                                     headers={"cache-control": "no-cache", "x-accel-buffering": "no"})
        kind, value = first
        while kind != "done":
            kind, value = await ticket.next()
        return JSONResponse(completion.whole(value), headers=chat_response.headers(value))

    async def models(request: Request):
        return JSONResponse({"object": "list", "data": [_model_card(config.model_name, started)]})

    async def model(request: Request):
        # With one model loaded, any name is served by it (as llama.cpp's server does).
        return JSONResponse(_model_card(config.model_name, started))

    async def health(request: Request):
        return JSONResponse({"status": "ok", "model": config.model_name,
                             "parallel": config.parallel, "busy": turns.busy,
                             "most_sequences": turns.most_sequences, "threads": turns.threads})

    app = Starlette(routes=[
        Route("/v1/chat/completions", completions, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{name:path}", model, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
    ], exception_handlers={APIError: _api_error, HTTPException: _http_error, Exception: _fault})
    return Guard(app, config.api_key, config.max_body)


async def _events(ticket, first, completion, include_usage: bool):
    """Server-sent events: a role chunk, text chunks, the finish, usage, [DONE]."""
    try:
        yield _sse(completion.chunk({"role": "assistant", "content": ""}))
        kind, value = first
        while kind == "text":
            yield _sse(completion.chunk({"content": value}))
            kind, value = await ticket.next()
        yield _sse(completion.last_chunk(value))
        if include_usage:
            yield _sse(completion.usage_chunk(value))
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


def _sampling(defaults: SamplingSettings, req) -> SamplingSettings:
    return defaults.with_(temperature=req.temperature, top_p=req.top_p, seed=req.seed,
                          max_tokens=req.max_tokens)


def _title(messages) -> str:
    first = next((content for role, content in messages if role == "user"), "")
    line = " ".join(first.split())
    return line if len(line) <= 60 else line[:59].rstrip() + "…"


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
