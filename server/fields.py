"""Reading a request body's fields: each one honoured, accepted as a no-op, or refused.

A field chatdb does not know, or knows and cannot honour, is refused with a
400 naming it (`param`) whenever its value would change the answer: a
client that asked for something is told, never silently given less. Fields
that change nothing here (who the user is, metadata for the client's own
bookkeeping) are accepted as they are.
"""

from dataclasses import dataclass, field

from .errors import bad_field

NO_OPS = {"user", "metadata", "store", "service_tier", "prompt_cache_key", "safety_identifier"}


@dataclass
class Sampling:
    """The sampling fields both endpoints take (None: the server's default)."""
    max_tokens: "int | None" = None
    temperature: "float | None" = None
    top_p: "float | None" = None
    top_k: "int | None" = None
    min_p: "float | None" = None
    repeat_penalty: "float | None" = None
    seed: "int | None" = None
    stop: list = field(default_factory=list)
    logit_bias: tuple = ()
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0


SAMPLING = {"temperature", "top_p", "seed", "stop", "logit_bias", "presence_penalty",
            "frequency_penalty",
            "top_k", "min_p", "repeat_penalty"}   # the last three: llama.cpp's server's own


def sampling(body: dict, max_tokens: "int | None") -> Sampling:
    return Sampling(
        max_tokens=max_tokens, temperature=number(body, "temperature", 0.0, 2.0),
        top_p=number(body, "top_p", 0.0, 1.0), top_k=whole(body, "top_k", 0),
        min_p=number(body, "min_p", 0.0, 1.0),
        repeat_penalty=number(body, "repeat_penalty", 0.0, 10.0), seed=seed(body),
        stop=stops(body.get("stop")), logit_bias=logit_bias(body.get("logit_bias")),
        presence_penalty=number(body, "presence_penalty", -2.0, 2.0) or 0.0,
        frequency_penalty=number(body, "frequency_penalty", -2.0, 2.0) or 0.0)


def check_known(body: dict, honoured: set, refused: dict) -> None:
    """A 400 for a refused field (`refused`: name -> why) or an unknown one that is set."""
    for name, value in body.items():
        if name in honoured or name in NO_OPS or value is None:
            continue
        if name in refused:
            raise bad_field(name, f"'{name}': {refused[name]}", "unsupported_parameter")
        raise bad_field(name, f"'{name}' is not a parameter chatdb serve knows; "
                        "it is refused rather than ignored", "unsupported_parameter")


def is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def boolean(body: dict, key: str, name: "str | None" = None, default: bool = False) -> bool:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise bad_field(name or key, f"'{name or key}' must be true or false")
    return value


def whole(body: dict, key: str, low: int, high: "int | None" = None,
          name: "str | None" = None) -> "int | None":
    value, name = body.get(key), name or key
    if value is None:
        return None
    if not is_int(value) or value < low or (high is not None and value > high):
        span = f"from {low} to {high}" if high is not None else f"of {low} or more"
        raise bad_field(name, f"'{name}' must be a whole number {span} (got {value!r})")
    return value


def number(body: dict, key: str, low: float, high: float) -> "float | None":
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise bad_field(key, f"'{key}' must be a number from {low:g} to {high:g} (got {value!r})")
    return float(value)


def text(body: dict, key: str) -> "str | None":
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise bad_field(key, f"'{key}' must be a string")
    return value


def obj(body: dict, key: str, name: "str | None" = None) -> "dict | None":
    value, name = body.get(key), name or key
    if value is not None and not isinstance(value, dict):
        raise bad_field(name, f"'{name}' must be an object")
    return value


def seed(body: dict) -> "int | None":
    value = body.get("seed")
    if value is not None and not is_int(value):
        raise bad_field("seed", f"'seed' must be an integer (got {value!r})")
    return value


MAX_STOPS = 4


def stops(value) -> list[str]:
    if value is None:
        return []
    found = [value] if isinstance(value, str) else value
    if not isinstance(found, list) or not all(isinstance(s, str) for s in found) or len(found) > MAX_STOPS:
        raise bad_field("stop", f"'stop' must be a string or an array of up to {MAX_STOPS} strings")
    return [s for s in found if s]


def logit_bias(value) -> "tuple[tuple[int, float], ...]":
    """OpenAI's {token id (as a string): bias from -100 to 100}."""
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise bad_field("logit_bias", "'logit_bias' must be an object of token ids to biases")
    out = []
    for key, bias in value.items():
        try:
            token = int(key)
        except (TypeError, ValueError):
            token = -1
        if token < 0:
            raise bad_field("logit_bias", f"'logit_bias': {key!r} is not a token id")
        if isinstance(bias, bool) or not isinstance(bias, (int, float)) or not -100 <= bias <= 100:
            raise bad_field("logit_bias", f"'logit_bias[{key}]' must be a number from -100 to 100")
        out.append((token, float(bias)))
    return tuple(out)
