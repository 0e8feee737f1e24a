"""The tokens of a conversation path, one array per message.

A message's tokens are stored in the archive the first time they are
computed (per tokenizer: model plus chat template), so later turns and
other processes reuse them, and generated answers keep the exact tokens the
model produced rather than a re-tokenization of their text.
"""

import hashlib
from dataclasses import dataclass

import numpy as np

from chatdb.archive import Archive
from chatdb.records import Message

from ..errors import Cancelled
from ..llama.model import Model
from .content_tokens import content_spans, sentinel, specials_of, tokens_with_text_content
from .template import ChatTemplate, TemplateUnstable
from .tool_format import FALLBACK, CallSyntax, as_native_message, as_template_message


@dataclass
class PathTokens:
    message_ids: list[int]
    arrays: list[np.ndarray]
    stable: bool = True       # False: the template is not prefix-stable

    @property
    def lengths(self) -> list[int]:
        return [len(a) for a in self.arrays]

    def flat(self) -> np.ndarray:
        return np.concatenate(self.arrays) if self.arrays else np.zeros(0, np.int32)

    def ends(self) -> list[int]:
        """Token position just past each message."""
        return [int(end) for end in np.cumsum(self.lengths)]


def as_chat(messages: list[Message], syntax: CallSyntax = FALLBACK) -> list[dict]:
    """The messages as the template reads them (tool_format: natively where `syntax` says
    the template has tool support)."""
    return [chat_message(m.role, m.content, syntax) for m in messages]


def chat_message(role: str, content: str, syntax: CallSyntax = FALLBACK) -> dict:
    if syntax.native:
        return as_native_message(role, content, syntax)
    return as_template_message(role, content)


def tokenizer_id(template: ChatTemplate, model_fp: str) -> str:
    source = template.source.encode()
    return hashlib.sha256(model_fp.encode() + b"\0" + source).hexdigest()[:24]


STORE_EVERY = 64   # messages tokenized per transaction, and between looks at a stop request


class PromptBuilder:
    def __init__(self, model: Model, template: ChatTemplate, archive: Archive, tokenizer: str):
        self.model, self.template, self.archive, self.tokenizer = model, template, archive, tokenizer
        self.cancelled = None   # a turn's stop request (callable), asked while reading a path

    def chat(self, messages: list[Message]) -> list[dict]:
        """`messages` as this builder's template reads them."""
        return as_chat(messages, self.template.tool_syntax)

    def stop_when(self, cancelled) -> None:
        """Reading paths from now on stops (Cancelled) once `cancelled()` is true (the turn's
        stop request; None: never)."""
        self.cancelled = cancelled

    def path_tokens(self, path: list[Message]) -> PathTokens:
        """Tokens for each message of `path`, from the archive where stored.

        Those computed are stored STORE_EVERY messages at a time, each batch one
        transaction; `self.cancelled()` (set by the engine for a turn: Ctrl-C,
        SIGTERM) is asked as often, so reading a long imported chat stops at once.
        """
        if not path:
            return PathTokens([], [])
        stored = dict(self.archive.tokens.along_path(path[-1].id, self.tokenizer))
        arrays, chat, computed = [], self.chat(path), []
        try:
            for i, message in enumerate(path):
                tokens = stored.get(message.id)
                if tokens is None:
                    tokens = np.asarray(self.piece_tokens(chat[:i], chat[i]), np.int32)
                    computed.append((message.id, tokens))
                    if len(computed) == STORE_EVERY:
                        self._store(computed)
                        self._check_cancelled()
                arrays.append(tokens)
        except TemplateUnstable:
            return self.whole(path)
        finally:
            self._store(computed)   # what was computed is kept, even when stopped
        return PathTokens([m.id for m in path], arrays)

    def lazy(self, path: list[Message]) -> "LazyPathTokens":
        """The path's tokens, each message's computed only when asked for (a window)."""
        return LazyPathTokens(self, path)

    def _store(self, computed: list) -> None:
        if computed:
            with self.archive.transaction():
                for message_id, tokens in computed:
                    self.archive.tokens.put(message_id, self.tokenizer, tokens)
            computed.clear()

    def _check_cancelled(self) -> None:
        if self.cancelled is not None and self.cancelled():
            raise Cancelled()

    def whole(self, path: list[Message]) -> PathTokens:
        """The path tokenized as one text (for templates that are not prefix-stable)."""
        chat = self.chat(path)
        text = self.template.boundary(chat)
        marked = self.template.boundary([{**m, "content": sentinel(i)} for i, m in enumerate(chat)])
        tokens = self.text_tokens(text, marked, [m["content"] for m in chat])
        return PathTokens([path[-1].id], [np.asarray(tokens, np.int32)], stable=False)

    def piece_tokens(self, before: list[dict], message: dict) -> list[int]:
        text = self.template.message_text(before, message)
        content = message["content"]
        if content and text.count(content) == 1 and not content.isspace():
            # where it sits is plain: no second rendering needed to tell
            start = text.index(content)
            return tokens_with_text_content(self.model, specials_of(self.model), text,
                                            [(start, start + len(content))])
        marked = self.template.message_text(before, {**message, "content": sentinel(0)})
        return self.text_tokens(text, marked, [content])

    def text_tokens(self, text: str, marked: str, contents: list[str]) -> list[int]:
        """Tokens of template text holding `contents`, the contents read as text only
        (`marked`: the same text with sentinels for them; see content_tokens)."""
        spans = content_spans(text, marked, contents)
        if spans is None:  # a template that rewrites content: where it sits cannot be told
            return self.model.tokenize(text)
        return tokens_with_text_content(self.model, specials_of(self.model), text, spans)

    def generation_tokens(self, path: list[Message]) -> list[int]:
        """The tokens that open an answer after `path`."""
        return self.model.tokenize(self.template.generation_prompt(self.chat(path)))

    def answer_tokens(self, before: list[dict], opening: list[int], content: str,
                      generated: list[int], covered: "int | None" = None) -> "list[int] | None":
        """An answer's exact tokens: its opening, what was generated, the template's close.

        `covered` is how much of `content` the generated tokens spell (less
        when a marker the model wrote as text cut a token short); the rest is
        tokenized with the close. None when the template does not render the
        answer as opening + content + suffix (then they cannot be the tokens
        the model saw).
        """
        template = self.template
        answer = chat_message("assistant", content, template.tool_syntax)
        text = template.message_text(before, answer)
        head = template.generation_prompt(before) + content[:covered]
        if not text.startswith(head):
            return None
        suffix = text[len(head):]
        if generated and self.model.is_eog(generated[-1]):
            eog = self.model.token_text(generated[-1])
            if suffix.startswith(eog):
                suffix = suffix[len(eog):]
            else:
                generated = generated[:-1]
        return list(opening) + list(generated) + (self.model.tokenize(suffix) if suffix else [])


class LazyPathTokens:
    """A path's tokens computed on demand, from the end back: a window over a long path (an
    imported chat of 100,000 messages) reads only the messages it keeps, and the few
    before them that show it must stop. Stored as computed, like path_tokens'."""

    def __init__(self, builder: PromptBuilder, path: list[Message]):
        self.builder, self.path, self.chat = builder, path, builder.chat(path)
        stored = builder.archive.tokens.along_path(path[-1].id, builder.tokenizer) if path else []
        self.arrays: "list[np.ndarray | None]" = [tokens for _, tokens in stored]
        self.computed: list = []

    def length(self, i: int) -> int:
        return len(self.array(i))

    def array(self, i: int) -> np.ndarray:
        if self.arrays[i] is None:   # TemplateUnstable propagates: the caller retokenizes
            tokens = np.asarray(self.builder.piece_tokens(self.chat[:i], self.chat[i]), np.int32)
            self.arrays[i] = tokens
            self.computed.append((self.path[i].id, tokens))
            if len(self.computed) == STORE_EVERY:
                self.store()
                self.builder._check_cancelled()
        return self.arrays[i]

    def store(self) -> None:
        self.builder._store(self.computed)

    def tokens(self, indexes) -> PathTokens:
        indexes = list(indexes)
        return PathTokens([self.path[i].id for i in indexes], [self.array(i) for i in indexes])

