"""A request body as JSON, or a 400 saying why not.

Python's parser fails in ways that are no syntax error: nesting past its
recursion limit (100k brackets), an integer of more digits than it converts
(max_tokens of 5,000 digits), and JSON's "\\ud800" escape, which parses into a
lone surrogate that no UTF-8 text (the archive, a tokenizer, a log) can hold.
Each is the client's mistake: 400, naming the field for a surrogate.
"""

import json

from .errors import APIError


def parse_body(body: bytes):
    try:
        value = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _invalid(f"the request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise _invalid("the request body is nested too deeply") from None
    except ValueError:   # an integer of more digits than Python converts
        raise _invalid("the request body holds a number with too many digits to read") from None
    check_text(value)
    return value


def check_text(value) -> None:
    """APIError naming the first string (key or value) holding a lone surrogate."""
    pending = [("", value)]
    while pending:
        where, item = pending.pop()
        if isinstance(item, dict):
            for key, inner in item.items():
                _check_string(key, where or "the body")
                pending.append((f"{where}.{key}" if where else key, inner))
        elif isinstance(item, list):
            pending += [(f"{where}[{i}]", inner) for i, inner in enumerate(item)]
        elif isinstance(item, str):
            _check_string(item, where)


def _check_string(text: str, where: str) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise APIError(400, f"'{where}' holds a lone surrogate \\u{ord(text[exc.start]):04x} "
                       "(JSON's escape of half a character), which is not text",
                       param=where.split(".")[0].split("[")[0] or None,
                       code="invalid_value") from None


def _invalid(message: str) -> APIError:
    return APIError(400, message, code="invalid_json")
