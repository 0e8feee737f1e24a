"""ASGI middleware in front of every route: the API key, and the size of request bodies.

Both answer before any handler runs, in the OpenAI error shape. /health is
open without the key (a container's health check has none; it says nothing
private: the model's name and how busy the server is). The key is
compared in constant time (hmac.compare_digest), so its bytes cannot be
guessed from response times.
"""

import hmac

from .errors import APIError, error_response


OPEN_PATHS = ("/health", "/v1/health")


class BodyTooLarge(APIError):
    """Raised while a body without Content-Length is read (the app's handler renders it)."""

    def __init__(self, limit: int):
        super().__init__(413, f"the request body is larger than {limit} bytes",
                         code="request_too_large")


class Guard:
    def __init__(self, app, api_key: "str | None", max_body: int):
        self.app, self.max_body = app, max_body
        self.expected = f"Bearer {api_key}".encode() if api_key else None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        if self.expected is not None and scope["path"] not in OPEN_PATHS and not hmac.compare_digest(
                headers.get(b"authorization", b""), self.expected):
            return await error_response(
                401, "a valid API key is required: send 'Authorization: Bearer KEY'",
                type="authentication_error", code="invalid_api_key",
                headers={"www-authenticate": "Bearer"})(scope, receive, send)
        length = headers.get(b"content-length", b"")
        if length.isdigit() and int(length) > self.max_body:
            return await self._too_large(scope, receive, send)
        await self.app(scope, self._limited(receive), send)

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
