"""The guess that most of a drafter's candidate continuations share.

Prompt lookup and the archive drafter both find several places where the
text they follow occurred before; a continuation written the same way at
three of them is a better guess than the one written once, even if that
one is the nearest.
"""

from collections import Counter


def vote(continuations: list, k: int) -> "tuple[list[int], list[int]]":
    """The guess most continuations share, token by token (ties: the earliest listed), and
    the indexes of those that agree with all of it."""
    if len(continuations) == 1:
        return list(continuations[0][:k]), [0]
    alive, guess = list(range(len(continuations))), []
    for j in range(k):
        counts = Counter(continuations[i][j] for i in alive if j < len(continuations[i]))
        if not counts:
            break
        best = max(counts.values())
        token = next(continuations[i][j] for i in alive
                     if j < len(continuations[i]) and counts[continuations[i][j]] == best)
        guess.append(token)
        alive = [i for i in alive if j < len(continuations[i]) and continuations[i][j] == token]
    return guess, alive
