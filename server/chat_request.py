"""Reading a /v1/chat/completions body into what the engine needs, or a 400 naming the field."""

from dataclasses import dataclass, field

from .errors import bad_field

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
UNSUPPORTED = {  # fields chatdb cannot honour: refused rather than ignored
    "tools": "tools are not supported", "tool_choice": "tools are not supported",
    "functions": "function calling is not supported",
    "function_call": "function calling is not supported",
    "audio": "audio output is not supported", "prediction": "predicted outputs are not supported",
}
MAX_STOPS = 4


@dataclass
class ChatRequest:
    messages: list[tuple[str, str]]
    model: str = ""
    stream: bool = False
    include_usage: bool = False
    max_tokens: "int | None" = None
    temperature: "float | None" = None
    top_p: "float | None" = None
    seed: "int | None" = None
    stop: list[str] = field(default_factory=list)
    user: "str | None" = None


def parse(body) -> ChatRequest:
    if not isinstance(body, dict):
        raise bad_field(None, "the request body must be a JSON object", "invalid_json")
    for name, why in UNSUPPORTED.items():
        if body.get(name) not in (None, [], {}):
            raise bad_field(name, f"'{name}': {why}", "unsupported_parameter")
    _check_n(body.get("n"))
    model = body.get("model", "")
    if not isinstance(model, str):
        raise bad_field("model", "'model' must be a string")
    stream = _bool(body, "stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise bad_field("stream_options", "'stream_options' must be an object")
    return ChatRequest(
        messages=_messages(body.get("messages")), model=model, stream=stream,
        include_usage=bool(stream and options and _bool(options, "include_usage", "stream_options.include_usage")),
        max_tokens=_max_tokens(body), temperature=_number(body, "temperature", 0.0, 2.0),
        top_p=_number(body, "top_p", 0.0, 1.0), seed=_seed(body.get("seed")),
        stop=_stop(body.get("stop")), user=_user(body.get("user")))


def _messages(messages) -> list[tuple[str, str]]:
    if not isinstance(messages, list) or not messages:
        raise bad_field("messages", "'messages' must be a non-empty array of messages")
    out = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise bad_field(where, f"'{where}' must be an object")
        role = message.get("role")
        if role not in ROLES:
            raise bad_field(f"{where}.role", f"'{where}.role' must be system, user or assistant "
                            f"(got {role!r})")
        if message.get("tool_calls") or message.get("function_call"):
            raise bad_field(f"{where}.tool_calls", f"'{where}': tool calls are not supported",
                            "unsupported_parameter")
        out.append((ROLES[role], _content(message.get("content"), f"{where}.content")))
    return out


def _content(content, where: str) -> str:
    """A string, or a list of text parts (joined); images and audio are refused."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad_field(where, f"'{where}' must be a string or an array of text parts")
    texts = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind != "text" or not isinstance(part.get("text"), str):
            what = f"{kind} parts are not supported" if kind else "each part must be {type: text, text}"
            raise bad_field(f"{where}[{j}]", f"'{where}[{j}]': {what} (this model reads text only)",
                            "unsupported_content" if kind else "invalid_value")
        texts.append(part["text"])
    return "".join(texts)


def _check_n(n) -> None:
    if n is not None and (not _is_int(n) or n != 1):
        raise bad_field("n", f"'n' must be 1: chatdb gives one answer per request (got {n!r})",
                        "unsupported_parameter")


def _bool(body: dict, key: str, name: "str | None" = None) -> bool:
    value = body.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise bad_field(name or key, f"'{name or key}' must be true or false")
    return value


def _max_tokens(body: dict) -> "int | None":
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if value is None:
            continue
        if not _is_int(value) or value < 1:
            raise bad_field(key, f"'{key}' must be a whole number above 0 (got {value!r})")
        return value
    return None


def _number(body: dict, key: str, low: float, high: float) -> "float | None":
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise bad_field(key, f"'{key}' must be a number from {low:g} to {high:g} (got {value!r})")
    return float(value)


def _seed(value) -> "int | None":
    if value is None:
        return None
    if not _is_int(value):
        raise bad_field("seed", f"'seed' must be an integer (got {value!r})")
    return value


def _stop(value) -> list[str]:
    if value is None:
        return []
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops) or len(stops) > MAX_STOPS:
        raise bad_field("stop", f"'stop' must be a string or an array of up to {MAX_STOPS} strings")
    return [s for s in stops if s]


def _user(value) -> "str | None":
    if value is not None and not isinstance(value, str):
        raise bad_field("user", "'user' must be a string")
    return value


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
