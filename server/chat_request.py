"""Reading a /v1/chat/completions body into what the engine needs, or a 400 naming the field."""

from dataclasses import dataclass, field

from chatdb.tags import TagError, tag_name
from engine.prompt.tool_format import FALLBACK, CallSyntax

from . import fields as f
from .errors import bad_field
from .output_format import OutputFormat, read_response_format
from .tool_request import ToolChoice, read_tool_call, read_tools

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant",
         "tool": "tool"}
HONOURED = {"model", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens",
            "n", "response_format", "tools", "tool_choice", "parallel_tool_calls", "logprobs",
            "top_logprobs", "chatdb"} | f.SAMPLING
REFUSED = {
    "functions": "the deprecated function calling is not supported: send 'tools'",
    "function_call": "the deprecated function calling is not supported: send 'tool_choice'",
    "audio": "audio output is not supported", "prediction": "predicted outputs are not supported",
    "modalities": "this model answers in text only",
    "reasoning_effort": "this model has no reasoning effort to set",
    "verbosity": "this model has no verbosity to set",
    "web_search_options": "web search is not supported",
}
MOST_N = 8
MOST_TOP_LOGPROBS = 20


@dataclass
class ChatMessage:
    role: str                                  # system, user, assistant or tool
    content: str
    tool_calls: list = field(default_factory=list)   # an assistant's: [{id, name, arguments}]
    tool_call_id: "str | None" = None          # a tool result's


@dataclass
class ChatRequest:
    messages: list[ChatMessage]
    model: str = ""
    stream: bool = False
    include_usage: bool = False
    sampling: f.Sampling = field(default_factory=f.Sampling)
    user: "str | None" = None
    n: int = 1
    output: OutputFormat = field(default_factory=OutputFormat)
    tools: list = field(default_factory=list)         # tool_request.Tool
    tool_choice: ToolChoice = field(default_factory=ToolChoice)
    logprobs: bool = False
    top_logprobs: int = 0
    syntax: CallSyntax = FALLBACK       # how the model's template takes tools (tool_support)
    tags: list = field(default_factory=list)    # chatdb.tags: given to the conversation


def parse(body, syntax: CallSyntax = FALLBACK) -> ChatRequest:
    """`syntax`: the model's (its calls are constrained and written back in its spacing)."""
    if not isinstance(body, dict):
        raise bad_field(None, "the request body must be a JSON object", "invalid_json")
    if body.get("modalities") == ["text"]:        # what it answers in anyway
        body = {k: v for k, v in body.items() if k != "modalities"}
    f.check_known(body, HONOURED, REFUSED)
    model = f.text(body, "model") or ""
    stream = f.boolean(body, "stream")
    options = f.obj(body, "stream_options") or {}
    tools = read_tools(body.get("tools"))
    logprobs = f.boolean(body, "logprobs")
    top = f.whole(body, "top_logprobs", 0, MOST_TOP_LOGPROBS)
    if top and not logprobs:
        raise bad_field("top_logprobs", "'top_logprobs' needs 'logprobs': true")
    return ChatRequest(
        messages=_messages(body.get("messages")), model=model, stream=stream,
        include_usage=stream and f.boolean(options, "include_usage", "stream_options.include_usage"),
        sampling=f.sampling(body, _max_tokens(body)), user=f.text(body, "user"),
        n=f.whole(body, "n", 1, MOST_N) or 1, output=read_response_format(body.get("response_format")),
        tools=tools, tool_choice=read_tool_call(body, tools, syntax.separators), logprobs=logprobs,
        top_logprobs=top or 0, syntax=syntax, tags=_tags(body.get("chatdb")))


def _messages(messages) -> list[ChatMessage]:
    if not isinstance(messages, list) or not messages:
        raise bad_field("messages", "'messages' must be a non-empty array of messages")
    out = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise bad_field(where, f"'{where}' must be an object")
        role = message.get("role")
        if not isinstance(role, str) or role not in ROLES:   # a dict is not even hashable
            raise bad_field(f"{where}.role", f"'{where}.role' must be system, developer, user, "
                            f"assistant or tool (got {role!r})")
        if message.get("function_call"):
            raise bad_field(f"{where}.function_call", f"'{where}.function_call': the deprecated "
                            "function calling is not supported: send 'tool_calls'",
                            "unsupported_parameter")
        calls = _tool_calls(message.get("tool_calls"), where)
        if calls and role != "assistant":
            raise bad_field(f"{where}.tool_calls", f"'{where}.tool_calls': only an assistant's "
                            "message makes tool calls")
        content = message.get("content")
        if content is None and calls:
            content = ""
        call_id = message.get("tool_call_id")
        if role == "tool" and not isinstance(call_id, str):
            raise bad_field(f"{where}.tool_call_id", f"'{where}.tool_call_id' must be a string")
        out.append(ChatMessage(ROLES[role], _content(content, f"{where}.content"), calls,
                               call_id if role == "tool" else None))
    return out


def _tags(extension) -> list[str]:
    """chatdb's own part of a request: {"tags": [TAG, ...]} for the conversation it lands in."""
    if extension is None:
        return []
    if not isinstance(extension, dict):
        raise bad_field("chatdb", "'chatdb' must be an object: {\"tags\": [...]}")
    for key in extension:
        if key != "tags":
            raise bad_field(f"chatdb.{key}", f"'chatdb.{key}' is not a field chatdb serve knows "
                            "(it takes 'chatdb.tags')", "unsupported_parameter")
    tags = extension.get("tags") or []
    if not isinstance(tags, list):
        raise bad_field("chatdb.tags", "'chatdb.tags' must be an array of strings")
    for i, tag in enumerate(tags):
        try:
            tag_name(tag)
        except TagError as exc:
            raise bad_field(f"chatdb.tags[{i}]", f"'chatdb.tags[{i}]': {exc}") from None
    return tags


def _tool_calls(calls, where: str) -> list:
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise bad_field(f"{where}.tool_calls", f"'{where}.tool_calls' must be an array")
    out = []
    for j, call in enumerate(calls):
        at = f"{where}.tool_calls[{j}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str) \
                or not isinstance(function.get("arguments", ""), str) \
                or call.get("type", "function") not in ("function", None):
            raise bad_field(at, f"'{at}' must be {{id, type: function, function: {{name, arguments}}}}")
        out.append({"id": str(call.get("id") or ""), "name": function["name"],
                    "arguments": function.get("arguments") or "{}"})
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


def _max_tokens(body: dict) -> "int | None":
    for key in ("max_completion_tokens", "max_tokens"):
        if body.get(key) is not None:
            return f.whole(body, key, 1)
    return None
