"""A message cut into chunks an embedding model reads whole.

A chunk ends at a paragraph, else a sentence, else a word boundary, so that
each is a piece of text that means something alone; each keeps the offset
of its first character in the message, for the snippet that shows it.
"""

import re
from dataclasses import dataclass

CHUNK_TOKENS = 256  # tokens per chunk, special ones included: all-MiniLM's own limit
PARAGRAPHS = re.compile(r"\n\s*\n")
SENTENCES = re.compile(r"(?<=[.!?。！？])\s+")
WORDS = re.compile(r"\s+")
LONGEST_PIECE = 200  # characters of a run without spaces (a URL, base64) cut as it comes


@dataclass(frozen=True)
class Chunk:
    start: int   # offset of its first character in the message
    text: str


def chunk_text(text: str, count_tokens, limit: int = CHUNK_TOKENS) -> list[Chunk]:
    """The chunks of `text`, each at most `limit` tokens with two special ones added;
    [] for text with nothing but spaces. `count_tokens(str) -> int`."""
    budget = max(8, limit - 2)
    pieces = list(_pieces(text, 0, len(text), count_tokens, budget, 0))
    chunks: list[Chunk] = []
    start = end = None
    used = 0
    for a, b, n in pieces:
        if start is not None and used + n > budget:
            chunks.append(Chunk(start, text[start:end]))
            start = None
        if start is None:
            start, used = a, 0
        end, used = b, used + n
    if start is not None:
        chunks.append(Chunk(start, text[start:end]))
    return chunks


SPLITTERS = (PARAGRAPHS, SENTENCES, WORDS)


def _pieces(text: str, a: int, b: int, count_tokens, budget: int, level: int):
    """(start, end, tokens) of the spans of text[a:b] that fit the budget alone, in order:
    split at paragraphs, then sentences, then words, then every LONGEST_PIECE characters."""
    for start, end in _spans(text, a, b, level):
        n = count_tokens(text[start:end])
        if n <= budget or end - start <= 1:
            yield start, end, n
        elif level < len(SPLITTERS) - 1:
            yield from _pieces(text, start, end, count_tokens, budget, level + 1)
        else:
            step = max(1, min(LONGEST_PIECE, (end - start) * budget // max(n, 1)))
            for cut in range(start, end, step):
                yield cut, min(end, cut + step), count_tokens(text[cut:min(end, cut + step)])


def _spans(text: str, a: int, b: int, level: int):
    """Non-blank spans of text[a:b] between the separators of this level."""
    start = a
    for match in SPLITTERS[level].finditer(text, a, b):
        if text[start:match.start()].strip():
            yield start, match.start()
        start = match.end()
    if text[start:b].strip():
        yield _strip(text, start, b)


def _strip(text: str, a: int, b: int) -> tuple[int, int]:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b
