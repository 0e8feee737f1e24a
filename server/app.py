"""The routes: /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/models, /health,
/stats (each also without /v1)."""

import asyncio
import json
import logging
import time
from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from engine.llama.sampling import SamplingSettings

from engine.batching.turn_request import TurnRequest
from engine.errors import PromptTooLong
from engine.prompt.completion_prompt import EmptyPrompt, NoFillInTheMiddle
from engine.prompt.tool_format import FALLBACK, CallSyntax

from . import (chat_request, chat_response, completion_request, completion_response, embeddings,
               openapi)
from .bridge import first_or_disconnect, submit
from .chat_turn import chat_turn, completion_sampling, siblings
from .errors import STATUS_TYPES, APIError, bad_field, error_response
from .connections import BODY_TIMEOUT_S
from .guard import Guard
from .json_body import parse_body
from .limits import Limits
from .tool_stream import ToolStream
from .users import Keys

log = logging.getLogger("chatdb.server")


class AnyText(Convertor):
    """A path parameter of any characters: Starlette's `path` stops at a newline (its regex
    is `.*`), so a model name holding one was a 404 the API document does not give."""
    regex = r"[\s\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("any", AnyText())


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
    prompts: "object | None" = None   # engine.prompt.completion_prompt.CompletionPrompts
    vocab: "object | None" = None     # the model's llama_vocab, to check a grammar (None: unchecked)
    tool_syntax: CallSyntax = FALLBACK   # how the model's template takes tools (tool_support)
    keys: "Keys | None" = None        # several users (serve --keys); None: api_key's one
    limits: "Limits | None" = None    # per key: requests at once, tokens a minute
    share_prefix: bool = False        # users' requests may share a root system prompt's KV


def build_app(turns, config: ServerConfig):
    """The ASGI application; `turns` answers TurnRequests (engine.batching.request_loop's
    RequestLoop)."""
    started = int(time.time())
    limits = config.limits or Limits()

    async def chat(request: Request):
        req = chat_request.parse(await _json(request), config.tool_syntax)
        turn = chat_turn(req, config.sampling, config.n_vocab, _client(request, req),
                         config.parallel, config.vocab)
        turn.owner, turn.share_prefix = _owner(request), config.share_prefix
        ticket = submit(turns, turn)
        first = await first_or_disconnect(ticket, request.receive)
        if first is None:
            return Response(status_code=499)  # the client has gone: nobody reads this
        completion = chat_response.Completion(config.model_name)
        spend = _spender(limits, request)
        if req.stream:
            return _streaming(chat_events(ticket, first, completion, req, spend))
        outcomes = await ticket.outcomes(first)
        spend(outcomes)
        return JSONResponse(completion.whole(outcomes, req.tool_choice.takes_calls, req.logprobs),
                            headers=chat_response.headers(outcomes))

    async def completions(request: Request):
        req = completion_request.parse(await _json(request))
        turn = completion_turn(req, config, request)
        ticket = submit(turns, turn)
        first = await first_or_disconnect(ticket, request.receive)
        if first is None:
            return Response(status_code=499)
        completion = chat_response.Completion(config.model_name, "cmpl-")
        prefix = req.prompt if req.echo else ""
        spend = _spender(limits, request)
        if req.stream:
            return _streaming(text_events(ticket, first, completion, req, prefix, spend))
        outcomes = await ticket.outcomes(first)
        spend(outcomes)
        return JSONResponse(completion_response.whole(completion, outcomes, prefix,
                                                      req.logprobs is not None))

    async def models(request: Request):
        return JSONResponse({"object": "list", "data": [_model_card(config.model_name, started)]})

    async def model(request: Request):
        # With one model loaded, any name is served by it (as llama.cpp's server does).
        return JSONResponse(_model_card(config.model_name, started))

    async def health(request: Request):
        return JSONResponse({"status": "ok", "model": config.model_name,
                             "parallel": config.parallel, "busy": turns.busy,
                             "most_sequences": turns.most_sequences, "threads": turns.threads})

    async def stats(request: Request):
        user = request.state.user
        if not user.admin:
            raise APIError(403, "/stats is for an admin key ('admin' in the keys file)",
                           type="permission_error", code="not_admin")
        return JSONResponse({"object": "stats", "parallel": config.parallel, "busy": turns.busy,
                             "memory_states_bytes": turns.memory_bytes, "users": limits.stats()})

    async def schema(request: Request):
        return JSONResponse(openapi.document())

    routes = [Route("/openapi.json", schema, methods=["GET"])]
    for prefix in ("/v1", ""):    # several clients leave /v1 out of their base URL
        routes += [Route(f"{prefix}/chat/completions", chat, methods=["POST"]),
                   Route(f"{prefix}/completions", completions, methods=["POST"]),
                   Route(f"{prefix}/embeddings", embeddings.route(config.embeddings, _json),
                         methods=["POST"]),
                   Route(f"{prefix}/models", models, methods=["GET"]),
                   Route(f"{prefix}/models/{{name:any}}", model, methods=["GET"]),
                   Route(f"{prefix}/health", health, methods=["GET"]),
                   Route(f"{prefix}/stats", stats, methods=["GET"])]
    app = Starlette(routes=routes, exception_handlers={
        APIError: _api_error, HTTPException: _http_error, Exception: _fault})
    guarded = Guard(app, config.keys or Keys.single(config.api_key), config.max_body, limits)
    if not config.cors_origins:
        return guarded
    # Outside the key check: a browser's preflight carries no key, and the
    # answers (a 401 included) must carry the headers the page needs to read them.
    return CORSMiddleware(guarded, allow_origins=list(config.cors_origins),
                          allow_methods=["GET", "POST", "OPTIONS"], allow_headers=["*"],
                          expose_headers=["x-chatdb-conversation", "x-chatdb-restored-tokens",
                                          "x-chatdb-kv-source", "retry-after"], max_age=600)


def completion_turn(req, config: ServerConfig, request: Request) -> TurnRequest:
    """A completion's turn: its prompt's tokens (a 400 where they cannot be), not archived."""
    try:
        prompt = config.prompts.tokens(req.prompt, req.suffix)
    except NoFillInTheMiddle as exc:
        raise bad_field("suffix", f"'suffix': {exc}", "unsupported_parameter") from None
    except EmptyPrompt as exc:
        raise bad_field("prompt", f"'prompt': {exc}") from None
    except PromptTooLong as exc:
        raise APIError(400, str(exc), param="prompt", code="context_length_exceeded") from None
    turn = TurnRequest(messages=[], stop=req.sampling.stop, prompt=prompt,
                       sampling=completion_sampling(req, config.sampling, config.n_vocab),
                       owner=_owner(request))
    turn.siblings = siblings(turn, req.n, config.parallel)
    return turn


def _streaming(events) -> StreamingResponse:
    return StreamingResponse(events, media_type="text/event-stream",
                             headers={"cache-control": "no-cache", "x-accel-buffering": "no"})


async def chat_events(ticket, first, completion, req, spend=None):
    """Server-sent events: a role chunk per answer, content (or tool call) chunks, each
    answer's finish, usage, [DONE]."""
    n = len(ticket.answers)
    tools = [ToolStream() if req.tool_choice.takes_calls else None for _ in range(n)]
    pending: list = [[] for _ in range(n)]   # logprobs of tokens whose text has not gone yet
    done = {}
    try:
        for i in range(n):
            yield _sse(completion.chunk({"role": "assistant", "content": ""}, index=i))
        i, kind, value = first
        while True:
            if kind == "logprob":
                pending[i].append(chat_response.logprob_entry(value))
            elif kind == "text":
                for delta in (tools[i].feed(value) if tools[i] else [{"content": value}]):
                    yield _sse(completion.chunk(delta, index=i,
                                                logprobs=pending[i] if req.logprobs else None))
                    pending[i] = []
            else:
                for delta in (tools[i].close() if tools[i] else []):
                    yield _sse(completion.chunk(delta, index=i))
                called = bool(tools[i] and tools[i].calls)
                yield _sse(completion.chunk({}, chat_response.finish_reason(value.result, called),
                                            index=i))
                done[i] = value
                if len(done) == n:
                    break
            i, kind, value = await ticket.next()
        if spend is not None:
            spend([done[i] for i in range(n)])
        if req.include_usage:
            yield _sse(completion.usage_chunk([done[i] for i in range(n)]))
        yield "data: [DONE]\n\n"
    except APIError as exc:
        yield _sse(exc.body())
    finally:
        ticket.cancel()  # the client went away mid-answer: stop it, keep what was written


async def text_events(ticket, first, completion, req, prefix: str, spend=None):
    """A completion's events: its text in chunks (the echoed prompt first), the finish, [DONE]."""
    n, done, logprobs = len(ticket.answers), {}, req.logprobs is not None
    pending: list = [[] for _ in range(n)]
    try:
        for i in range(n):
            if prefix:
                yield _sse(completion_response.chunk(completion, i, prefix, [], logprobs))
        i, kind, value = first
        while True:
            if kind == "logprob":
                pending[i].append(value)
            elif kind == "text":
                yield _sse(completion_response.chunk(completion, i, value, pending[i], logprobs))
                pending[i] = []
            else:
                finish = chat_response.finish_reason(value.result, False)
                yield _sse(completion_response.chunk(completion, i, "", [], logprobs, finish))
                done[i] = value
                if len(done) == n:
                    break
            i, kind, value = await ticket.next()
        if spend is not None:
            spend([done[i] for i in range(n)])
        if req.include_usage:
            yield _sse({**completion.head("text_completion"), "choices": [],
                        "usage": chat_response.usage([done[i] for i in range(n)])})
        yield "data: [DONE]\n\n"
    except APIError as exc:
        yield _sse(exc.body())
    finally:
        ticket.cancel()


def _sse(value: dict) -> str:
    return f"data: {json.dumps(value, ensure_ascii=False)}\n\n"


async def _json(request: Request):
    try:
        body = await asyncio.wait_for(request.body(), BODY_TIMEOUT_S)
    except asyncio.TimeoutError:
        raise APIError(408, f"the request body did not arrive within {BODY_TIMEOUT_S} s",
                       code="timeout") from None
    return parse_body(body)


def _client(request: Request, req) -> str:
    return req.user or request.headers.get("user-agent") or "unknown"


def _owner(request: Request) -> "str | None":
    """The name of the user whose key the request carries (None: the archive's own)."""
    user = getattr(request.state, "user", None)
    return user.name if user is not None else None


def _spender(limits: Limits, request: Request):
    """Counts a finished request's tokens (prompt and answers, as usage) against its key."""
    user = getattr(request.state, "user", None)
    return lambda outcomes: limits.spend(user, chat_response.usage(outcomes)["total_tokens"])


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
