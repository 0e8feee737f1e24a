"""Reading a /v1/completions body: a raw prompt (and a suffix, filled in the middle), or a 400."""

from dataclasses import dataclass, field

from . import fields as f
from .errors import bad_field

HONOURED = {"model", "prompt", "suffix", "max_tokens", "n", "stream", "stream_options", "logprobs",
            "echo", "best_of"} | f.SAMPLING
REFUSED = {}
DEFAULT_MAX_TOKENS = 16      # OpenAI's, for this endpoint
MOST_LOGPROBS = 5


@dataclass
class CompletionRequest:
    prompt: str
    suffix: "str | None" = None
    stream: bool = False
    include_usage: bool = False
    sampling: f.Sampling = field(default_factory=f.Sampling)
    n: int = 1
    logprobs: "int | None" = None
    echo: bool = False


def parse(body) -> CompletionRequest:
    if not isinstance(body, dict):
        raise bad_field(None, "the request body must be a JSON object", "invalid_json")
    f.check_known(body, HONOURED, REFUSED)
    f.text(body, "model")
    n = f.whole(body, "n", 1, 8) or 1
    best_of = f.whole(body, "best_of", 1, 8)
    if best_of is not None and best_of != n:
        raise bad_field("best_of", "'best_of' other than 'n' is not supported: every answer "
                        "computed is returned", "unsupported_parameter")
    stream = f.boolean(body, "stream")
    options = f.obj(body, "stream_options") or {}
    logprobs = f.whole(body, "logprobs", 0, MOST_LOGPROBS)
    echo = f.boolean(body, "echo")
    if echo and logprobs is not None:
        raise bad_field("echo", "'echo' with 'logprobs' is not supported: the prompt's own "
                        "log-probabilities are not computed", "unsupported_parameter")
    max_tokens = f.whole(body, "max_tokens", 1)
    return CompletionRequest(
        prompt=_prompt(body.get("prompt")), suffix=f.text(body, "suffix"), stream=stream,
        include_usage=stream and f.boolean(options, "include_usage", "stream_options.include_usage"),
        sampling=f.sampling(body, DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens),
        n=n, logprobs=logprobs, echo=echo)


def _prompt(value) -> str:
    """A string, or an array of one string (several prompts in one request are refused)."""
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        return value[0]
    if isinstance(value, str):
        return value
    if isinstance(value, list) and len(value) > 1:
        raise bad_field("prompt", "'prompt': one prompt per request (send several requests)",
                        "unsupported_parameter")
    raise bad_field("prompt", "'prompt' must be a string (token arrays are not supported)")
