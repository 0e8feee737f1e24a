"""A message's tokens with its content read as text: only the template's own markers are special.

A template's text is tokenized with special tokens parsed (its
`<|im_start|>` is one control token), but a message's content is what a
person typed or pasted: `<|im_start|>system` inside it must stay those
characters, or a pasted document could open a system turn of its own. The
rendered text is split as llama.cpp splits it, at the special tokens' texts,
but only outside the content; each run of plain text between two special
tokens (the content with the template text around it) is tokenized in one
piece with special parsing off, so text without markers gets the same
tokens as before.
"""

import weakref

import llama_cpp

SPECIAL_ATTRS = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
SENTINEL = "\x00chatdb-content\x00"


class SpecialTexts:
    """The texts of a model's control and user-defined tokens, longest first (as llama.cpp
    matches them). Read once per model: one pass over the vocabulary."""

    def __init__(self, model):
        self.model = model
        self._texts: "list[tuple[str, int]] | None" = None
        self._first: frozenset = frozenset()

    def texts(self) -> "list[tuple[str, int]]":
        if self._texts is None:
            vocab, found = self.model.vocab, {}
            for token in range(self.model.n_vocab):
                if llama_cpp.llama_vocab_get_attr(vocab, token) & SPECIAL_ATTRS:
                    text = self.model.token_text(token)
                    if text:
                        found.setdefault(text, token)
            self._texts = sorted(found.items(), key=lambda item: -len(item[0]))
            self._first = frozenset(text[0] for text in found)
        return self._texts

    def split(self, text: str) -> "list[str | int]":
        """`text` as plain runs (str) and special tokens (int), in order."""
        texts, parts, start, i = self.texts(), [], 0, 0
        while i < len(text):
            if text[i] in self._first:
                found = next(((s, t) for s, t in texts if text.startswith(s, i)), None)
                if found is not None:
                    if start < i:
                        parts.append(text[start:i])
                    parts.append(found[1])
                    i = start = i + len(found[0])
                    continue
            i += 1
        if start < len(text):
            parts.append(text[start:])
        return parts


_OF_MODEL: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def specials_of(model) -> SpecialTexts:
    """The model's SpecialTexts, shared by everything that tokenizes for it."""
    if model not in _OF_MODEL:
        _OF_MODEL[model] = SpecialTexts(model)
    return _OF_MODEL[model]


def tokens_with_text_content(model, specials: SpecialTexts, rendered: str,
                             contents: "list[tuple[int, int]]") -> list[int]:
    """Tokens of `rendered`, whose spans `contents` ([start, end) each) are text only."""
    parts: "list[str | int]" = []
    at = 0
    for start, end in contents:
        parts += specials.split(rendered[at:start])
        parts.append(rendered[start:end])
        at = end
    parts += specials.split(rendered[at:])
    tokens, run = [], []
    for part in parts + [None]:
        if isinstance(part, str):
            run.append(part)
            continue
        if run:
            tokens += model.tokenize("".join(run), special=False)
            run = []
        if part is not None:
            tokens.append(part)
    return tokens


def sentinel(i: int) -> str:
    return f"{SENTINEL}{i}{SENTINEL}"


def content_spans(rendered: str, marked: str, contents: "list[str]") -> "list[tuple[int, int]] | None":
    """Where each of `contents` sits in `rendered`, told from `marked`: the same rendering
    with sentinel(i) for content i. None when the template changes content in other ways
    than trimming it, or renders anything else differently (then they cannot be told)."""
    spans, at, out = [], 0, 0   # at: a place in `marked`; out: the same place in `rendered`
    for i, content in enumerate(contents):
        mark = sentinel(i)
        where = marked.find(mark, at)
        if where < 0:
            if content.strip():
                return None
            continue   # an empty content the template leaves out
        if rendered[out:out + where - at] != marked[at:where]:
            return None
        out += where - at
        shown = next((c for c in (content, content.strip()) if rendered.startswith(c, out)), None)
        if shown is None:
            return None
        spans.append((out, out + len(shown)))
        out += len(shown)
        at = where + len(mark)
    return spans if marked[at:] == rendered[out:] else None
