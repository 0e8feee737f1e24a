"""Prompt-lookup drafting: guess the next tokens from earlier text of the conversation.

When an answer quotes or edits something already in the path (a block of
code, an earlier message), the tokens after the current n-gram's last
earlier occurrence are likely next. Indexing is incremental: one dict
update per n per token, and a draft is one dict lookup per n.
"""

N_MAX, N_MIN = 4, 2


class LookupDrafter:
    free_to_ask = True   # a guess is a dict lookup, no forward pass: asked even while paused

    def __init__(self, history=(), n_max: int = N_MAX, n_min: int = N_MIN):
        self.n_max, self.n_min = n_max, n_min
        self.tokens: list[int] = []
        self.index: dict[tuple, int] = {}   # n-gram -> position just after its latest occurrence
        for token in history:
            self.add(token)

    def add(self, token: int) -> None:
        """Append a token; the n-grams ending before it now point at it."""
        tokens = self.tokens
        tokens.append(token)
        end = len(tokens) - 1
        for n in range(self.n_min, self.n_max + 1):
            if end >= n:
                self.index[tuple(tokens[end - n:end])] = end

    def propose(self, context: list[int], k: int) -> list[int]:
        """Up to k guesses after `context`, which only ever grows by accepted tokens."""
        for token in context[len(self.tokens):]:
            self.add(token)
        return self.draft(k)

    def draft(self, k: int) -> list[int]:
        """Up to k tokens that followed the longest recent n-gram earlier on."""
        tokens = self.tokens
        for n in range(self.n_max, self.n_min - 1, -1):
            if len(tokens) < n:
                continue
            start = self.index.get(tuple(tokens[-n:]))
            if start is not None and start < len(tokens):
                return tokens[start: start + k]
        return []
