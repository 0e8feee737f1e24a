"""Errors in the OpenAI API's shape: {"error": {"message", "type", "param", "code"}}.

Every failure a client can meet is one of these; a fault in chatdb itself
is reported as a one-line server_error, never as a traceback.
"""

from starlette.responses import JSONResponse


class APIError(Exception):
    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: "str | None" = None, code: "str | None" = None, headers: "dict | None" = None):
        super().__init__(message)
        self.status, self.message, self.type = status, message, type
        self.param, self.code, self.headers = param, code, headers or {}

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code}}

    def response(self) -> JSONResponse:
        return error_response(self.status, self.message, type=self.type, param=self.param,
                              code=self.code, headers=self.headers)


def error_response(status: int, message: str, *, type: str = "invalid_request_error",
                   param: "str | None" = None, code: "str | None" = None,
                   headers: "dict | None" = None) -> JSONResponse:
    body = {"error": {"message": message, "type": type, "param": param, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


def bad_field(param: str, message: str, code: str = "invalid_value") -> APIError:
    return APIError(400, message, param=param, code=code)


STATUS_TYPES = {401: "authentication_error", 404: "not_found_error", 405: "invalid_request_error",
                413: "invalid_request_error", 503: "server_error"}
