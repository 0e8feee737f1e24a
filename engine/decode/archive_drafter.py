"""Drafting from what the archive holds: an answer guessed from answers written before.

Where it looks, nearest first:
  1. related answers, each whole in memory (`Related`): the other answers to
     the question (a retry), the answers to its earlier versions (an edit),
     both guessed from their first token on,
     the conversation's other answers, and the answers being written beside
     this one to the same prompt (n > 1): n-grams of 2 to 4 tokens, like
     prompt lookup;
  2. every answer of the archive in this tokenizer (archive_index.py), by
     anchors of N tokens, each candidate checked against the stored tokens.
Of the candidates an anchor finds, the guess follows the continuation most of
them share, token by token (ties: the nearest source): a sentence written the
same way in three earlier answers wins over one written once. Once a guess is
made the drafter follows its candidates along their sources while the answer
keeps to them, with no new lookup; where the answer leaves them, it anchors
again. Where nothing matches, a step costs a dict lookup and, at an indexed
position, a binary search.
"""

from .archive_index import N, anchor_hash
from .vote import vote

N_MAX, N_MIN = 4, 2
PER_KEY = 8               # positions kept per n-gram of the related answers
WINDOW = 256              # tokens of a stored answer read at a time
RELATED_TOKENS = 32_768   # of related answers held in memory, all together


class Stored:
    """One stored answer, read a window at a time as a guess follows it."""

    def __init__(self, reader, message_id: int, tokenizer: str):
        self.reader, self.message_id, self.tokenizer = reader, message_id, tokenizer
        self.start, self.tokens = 0, []
        self.ended = False

    def slice(self, start: int, count: int) -> list:
        if start < self.start or start + count > self.start + len(self.tokens):
            if not (self.ended and start >= self.start):
                read = self.reader.window(self.message_id, self.tokenizer, max(0, start - N),
                                          max(WINDOW, count + N))
                self.start, self.tokens = max(0, start - N), read.tolist()
                self.ended = len(read) < max(WINDOW, count + N)
        at = start - self.start
        return self.tokens[at:at + count]


class Related:
    """N-grams of a few answers held whole; sources may grow (answers being written)."""

    def __init__(self):
        self.sources: list[list] = []
        self.done: list[int] = []        # tokens of each source indexed
        self.index: dict[tuple, list] = {}

    def add(self, tokens: list) -> None:
        self.sources.append(tokens)
        self.done.append(0)

    def catch_up(self) -> None:
        for s, tokens in enumerate(self.sources):
            for end in range(self.done[s], len(tokens)):
                for n in range(N_MIN, N_MAX + 1):
                    if end >= n:
                        found = self.index.setdefault(tuple(tokens[end - n:end]), [])
                        if len(found) < PER_KEY:
                            found.append((s, end))
            self.done[s] = len(tokens)

    def candidates(self, context: list) -> list:
        """(source, position after the n-gram) for the longest recent n-gram found."""
        for n in range(N_MAX, N_MIN - 1, -1):
            if len(context) >= n:
                found = self.index.get(tuple(context[-n:]))
                if found:
                    return [(self.sources[s], end) for s, end in found]
        return []


def _slice(source, start: int, count: int) -> list:
    return source.slice(start, count) if isinstance(source, Stored) else source[start:start + count]


class ArchiveDrafter:
    """Guesses for one answer; `related`: (message id, tokens) nearest first; `index`: the
    archive's (None: related answers only); `reader`: chatdb.token_sources.TokenSources."""

    free_to_ask = True   # a guess is lookups, no forward pass: asked even while paused

    def __init__(self, related=(), index=None, reader=None, tokenizer: str = ""):
        """`related`: (message id, tokens, tier), tier 0 or 1 for answers to this question
        or an earlier version of it (an answer is guessed from their start)."""
        self.related, self.index, self.reader, self.tokenizer = Related(), index, reader, tokenizer
        held = 0
        self.following: list = []   # [source, position of the next token] the answer keeps to
        for _, tokens, tier in related:
            part = tokens[:max(0, RELATED_TOKENS - held)].tolist()
            held += len(part)
            if part:
                self.related.add(part)
                if tier < 2:
                    self.following.append([part, 0])
        self.seen = -1   # the first call's context is the prompt: the answers' starts follow it
        self.found = {"related": 0, "archive": 0}   # anchorings by where they were found

    def live(self, tokens: list, start: int) -> None:
        """Another answer being written to the same prompt: its tokens from `start` on
        (`tokens` grows as it is written)."""
        self.related.add(_Tail(tokens, start))

    def kind(self, context: list) -> str:
        """Which of its guesses the next one would be, each kind with a policy of its own
        (drafting.DraftRun): "start" (an answer to the same question, from its start),
        "follow" (a source the answer has kept to so far) or "anchor" (a new lookup)."""
        if self.seen < 0:
            self.seen = len(context)
            return "start" if self.following else "anchor"
        new = context[self.seen:]
        self.seen = len(context)
        self.following = [[src, pos + len(new)] for src, pos in self.following
                          if _slice(src, pos, len(new)) == new]
        return "follow" if self.following else "anchor"

    def propose(self, context: list, k: int) -> list:
        """Up to k guesses after `context`, which `kind` has just seen."""
        if not self.following:
            self.following = self._anchor(context)
        if not self.following:
            return []
        continuations = [_slice(src, pos, k) for src, pos in self.following]
        guess, alive = vote(continuations, k)
        self.following = [self.following[i] for i in alive] or self.following
        return guess

    def _anchor(self, context: list) -> list:
        self.related.catch_up()
        found = [[src, pos] for src, pos in self.related.candidates(context)]
        if found:
            self.found["related"] += 1
            return found
        if self.index is None or len(context) < N:
            return []
        tail = context[-N:]
        key = anchor_hash(tail)
        if not self.index.kept(key):
            return []
        for message_id, offset in self.index.lookup(key):
            stored = Stored(self.reader, message_id, self.tokenizer)
            if offset >= N and stored.slice(offset - N, N) == tail:
                found.append([stored, offset])
        if found:
            self.found["archive"] += 1
        return found


class _Tail:
    """A growing list seen from `start` on (an answer being written beside this one)."""

    def __init__(self, tokens: list, start: int):
        self.tokens, self.offset = tokens, start

    def __len__(self) -> int:
        return max(0, len(self.tokens) - self.offset)

    def __getitem__(self, part: slice) -> list:
        start, stop, _ = part.indices(len(self))
        return self.tokens[self.offset + start:self.offset + stop]
