"""Prompt-lookup drafting: guess the next tokens from earlier text of the conversation.

When an answer quotes or edits something already in the path (a block of
code, an earlier message), the tokens after the current n-gram's earlier
occurrences are likely next. The longest recent n-gram found wins; of its
latest PER_KEY occurrences, the guess follows what most of them went on
with (vote.py; ties: the latest): code and lists repeat short n-grams, and
a model that repeats itself repeats its most frequent turn more often than
its latest. Indexing is incremental: one dict update per n per token.
"""

from .vote import vote

N_MAX, N_MIN = 4, 2
PER_KEY = 8   # occurrences kept per n-gram, the latest


class LookupDrafter:
    free_to_ask = True   # a guess is a dict lookup, no forward pass: asked even while paused

    def __init__(self, history=(), n_max: int = N_MAX, n_min: int = N_MIN):
        self.n_max, self.n_min = n_max, n_min
        self.tokens: list[int] = []
        # n-gram -> the positions just after its latest occurrences, oldest first
        self.index: dict[tuple, list[int]] = {}
        for token in history:
            self.add(token)

    def add(self, token: int) -> None:
        """Append a token; the n-grams ending before it now point at it."""
        tokens = self.tokens
        tokens.append(token)
        end = len(tokens) - 1
        for n in range(self.n_min, self.n_max + 1):
            if end >= n:
                found = self.index.setdefault(tuple(tokens[end - n:end]), [])
                found.append(end)
                if len(found) > PER_KEY:
                    del found[0]

    def propose(self, context: list[int], k: int) -> list[int]:
        """Up to k guesses after `context`, which only ever grows by accepted tokens."""
        for token in context[len(self.tokens):]:
            self.add(token)
        return self.draft(k)

    def draft(self, k: int) -> list[int]:
        """Up to k tokens that most often followed the longest recent n-gram earlier on."""
        found = self.occurrences()
        return vote([self.tokens[start:start + k] for start in reversed(found)], k)[0]

    def occurrences(self) -> list[int]:
        """Where the longest recent n-gram found occurred before: the positions just after its
        latest occurrences, oldest first (none: [])."""
        tokens = self.tokens
        for n in range(self.n_max, self.n_min - 1, -1):
            found = self.index.get(tuple(tokens[-n:])) if len(tokens) >= n else None
            if found:
                return found
        return []
