"""From a parsed chat request to the engine's TurnRequest: the messages as the archive keeps them,
and the sampling the request asks for."""

from dataclasses import replace

from engine.batching.turn_request import TurnRequest
from engine.errors import EngineError
from engine.llama.sampling import SamplingSettings, check_grammar
from engine.prompt.tool_format import ToolCall, call_text, tools_text

from .chat_request import ChatRequest
from .errors import bad_field


def archived_messages(req: ChatRequest) -> list[tuple[str, str]]:
    """(role, content) as stored: the tools listed in the system message, an assistant's
    calls written as the model writes them (in its template's spacing), tool results as
    `tool` messages. The same for every template: how one reads them is the engine's
    (engine/prompt/tool_format.py)."""
    out = []
    for message in req.messages:
        content = message.content
        if message.tool_calls:
            calls = call_text([ToolCall(c["name"], c["arguments"]) for c in message.tool_calls],
                              req.syntax)
            content = f"{content}\n{calls}" if content else calls
        out.append((message.role, content))
    if req.tools:
        specs = [t.spec for t in req.tools]
        if out[0][0] == "system":
            out[0] = ("system", tools_text(out[0][1], specs))
        else:
            out.insert(0, ("system", tools_text("", specs)))
    return out


def sampling_of(req: ChatRequest, defaults: SamplingSettings, n_vocab: int,
                vocab=None) -> SamplingSettings:
    """`vocab`: the model's, to check a grammar before anything is stored for the request."""
    if req.output.grammar is not None and req.tool_choice.takes_calls:
        raise bad_field("response_format", "'response_format' with tools needs 'tool_choice': "
                        "none (an answer is either calls or the format asked for)",
                        "unsupported_parameter")
    grammar = req.output.grammar or req.tool_choice.grammar
    if grammar is not None and vocab is not None:
        try:
            check_grammar(vocab, grammar)
        except EngineError as exc:
            raise bad_field("response_format" if req.output.grammar else "tools",
                            f"'{'response_format' if req.output.grammar else 'tools'}': {exc}") from None
    return replace(_common(req, defaults, n_vocab), grammar=grammar,
                   logprobs=req.top_logprobs if req.logprobs else None)


def completion_sampling(req, defaults: SamplingSettings, n_vocab: int) -> SamplingSettings:
    return replace(_common(req, defaults, n_vocab), logprobs=req.logprobs)


def _common(req, defaults: SamplingSettings, n_vocab: int) -> SamplingSettings:
    """The settings both endpoints take, over the server's defaults."""
    s = req.sampling
    for token, _ in s.logit_bias:
        if n_vocab and token >= n_vocab:
            raise bad_field("logit_bias", f"'logit_bias': token {token} is not in the model's "
                            f"vocabulary of {n_vocab}")
    chosen = defaults.with_(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k,
                            min_p=s.min_p, repeat_penalty=s.repeat_penalty, seed=s.seed,
                            max_tokens=s.max_tokens)
    return replace(chosen, presence_penalty=s.presence_penalty,
                   frequency_penalty=s.frequency_penalty, logit_bias=s.logit_bias)


def chat_turn(req: ChatRequest, defaults: SamplingSettings, n_vocab: int, client: str,
              parallel: int, vocab=None) -> TurnRequest:
    messages = archived_messages(req)
    sampling = sampling_of(req, defaults, n_vocab, vocab)
    turn = TurnRequest(messages=messages, sampling=sampling, stop=req.sampling.stop,
                       title=_title(messages), meta={"client": client, "via": "chatdb serve"},
                       tags=req.tags)
    turn.siblings = siblings(turn, req.n, parallel)
    return turn


def siblings(turn: TurnRequest, n: int, parallel: int) -> list[TurnRequest]:
    """n - 1 more answers to the turn's prompt, computed beside it (a sequence each); with a
    seed, answer i samples with seed + i, so each differs and each is repeatable."""
    if n > parallel:
        raise bad_field("n", f"'n' must be at most {parallel} here: the answers are computed "
                        f"together, a sequence each, and the server has {parallel} (--parallel)")
    seed = turn.sampling.seed
    return [replace(turn, sampling=replace(turn.sampling, seed=None if seed is None else seed + i),
                    siblings=[], cancelled=type(turn.cancelled)())
            for i in range(1, n)]


def _title(messages) -> str:
    first = next((content for role, content in messages if role == "user"), "")
    line = " ".join(first.split())
    return line if len(line) <= 60 else line[:59].rstrip() + "…"
