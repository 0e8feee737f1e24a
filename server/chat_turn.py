"""From a parsed chat request to the engine's Turn: the messages as the archive keeps them,
and the sampling the request asks for."""

from dataclasses import replace

from engine.batching.turns import Turn
from engine.llama.sampling import SamplingSettings
from engine.prompt.tool_format import ToolCall, call_text, tools_text

from .chat_request import ChatRequest
from .errors import bad_field


def archived_messages(req: ChatRequest) -> list[tuple[str, str]]:
    """(role, content) as stored: the tools listed in the system message, an assistant's
    calls written as the model writes them, tool results as `tool` messages."""
    out = []
    for message in req.messages:
        content = message.content
        if message.tool_calls:
            calls = call_text([ToolCall(c["name"], c["arguments"]) for c in message.tool_calls])
            content = f"{content}\n{calls}" if content else calls
        out.append((message.role, content))
    if req.tools:
        specs = [t.spec for t in req.tools]
        if out[0][0] == "system":
            out[0] = ("system", tools_text(out[0][1], specs))
        else:
            out.insert(0, ("system", tools_text("", specs)))
    return out


def sampling_of(req: ChatRequest, defaults: SamplingSettings, n_vocab: int) -> SamplingSettings:
    if req.output.grammar is not None and req.tool_choice.takes_calls:
        raise bad_field("response_format", "'response_format' with tools needs 'tool_choice': "
                        "none (an answer is either calls or the format asked for)",
                        "unsupported_parameter")
    for token, _ in req.logit_bias:
        if n_vocab and token >= n_vocab:
            raise bad_field("logit_bias", f"'logit_bias': token {token} is not in the model's "
                            f"vocabulary of {n_vocab}")
    chosen = defaults.with_(temperature=req.temperature, top_p=req.top_p, top_k=req.top_k,
                            min_p=req.min_p, repeat_penalty=req.repeat_penalty, seed=req.seed,
                            max_tokens=req.max_tokens)
    return replace(chosen, presence_penalty=req.presence_penalty,
                   frequency_penalty=req.frequency_penalty, logit_bias=req.logit_bias,
                   grammar=req.output.grammar or req.tool_choice.grammar,
                   logprobs=req.top_logprobs if req.logprobs else None)


def chat_turn(req: ChatRequest, defaults: SamplingSettings, n_vocab: int, client: str) -> Turn:
    if req.n > 1:
        raise bad_field("n", "'n' above 1 is not supported yet", "unsupported_parameter")
    messages = archived_messages(req)
    return Turn(messages=messages, sampling=sampling_of(req, defaults, n_vocab), stop=req.stop,
                title=_title(messages), meta={"client": client, "via": "chatdb serve"})


def _title(messages) -> str:
    first = next((content for role, content in messages if role == "user"), "")
    line = " ".join(first.split())
    return line if len(line) <= 60 else line[:59].rstrip() + "…"
