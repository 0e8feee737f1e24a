"""ASGI middleware in front of every route: the API key, the key's limits, and the size of
request bodies.

All answer before any handler runs, in the OpenAI error shape. /health is
open without the key (a container's health check has none; it says nothing
private: the model's name and how busy the server is). Which user a key is
(users.py, compared in constant time) goes to the handlers as
`request.state.user`; a POST is counted against that user's limits
(limits.py) until its response has ended.
"""

from .errors import APIError, error_response
from .limits import Limits
from .users import Keys


OPEN_PATHS = ("/health", "/v1/health", "/openapi.json")   # the document says nothing private


class BodyTooLarge(APIError):
    """Raised while a body without Content-Length is read (the app's handler renders it)."""

    def __init__(self, limit: int):
        super().__init__(413, f"the request body is larger than {limit} bytes",
                         code="request_too_large")


class Guard:
    def __init__(self, app, keys: Keys, max_body: int, limits: "Limits | None" = None):
        self.app, self.keys, self.max_body = app, keys, max_body
        self.limits = limits or Limits()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        user = self.keys.user(headers.get(b"authorization", b""))
        if user is None and scope["path"] not in OPEN_PATHS:
            return await error_response(
                401, "a valid API key is required: send 'Authorization: Bearer KEY'",
                type="authentication_error", code="invalid_api_key",
                headers={"www-authenticate": "Bearer"})(scope, receive, send)
        length = headers.get(b"content-length", b"")
        if length.isdigit() and int(length) > self.max_body:
            return await self._too_large(scope, receive, send)
        scope.setdefault("state", {})["user"] = user
        counted = user is not None and scope.get("method") == "POST"
        if counted:
            try:
                self.limits.enter(user)
            except APIError as refused:
                return await refused.response()(scope, receive, send)
        try:
            await self.app(scope, self._limited(receive), send)
        finally:
            if counted:
                self.limits.leave(user)

    def _limited(self, receive):
        seen = 0

        async def limited():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body:
                    raise BodyTooLarge(self.max_body)
            return message
        return limited

    async def _too_large(self, scope, receive, send):
        await BodyTooLarge(self.max_body).response()(scope, receive, send)
