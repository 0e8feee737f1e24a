"""How many prompt tokens one step of continuous batching carries, and how they are shared.

A step's time is a fixed part (building the graph, the output layer) plus a
part per token. On a CPU the part per token dominates (SmolLM2 on one core:
about 10 ms fixed, 8.5 ms a token), so a big prompt chunk buys nothing but
a long step: a request arriving meanwhile waits for all of it, and every
answer being generated stalls for it. On a GPU the part per token is tiny
and big chunks are what make prefill fast. So the chunk is the smallest
one whose fixed part is at most FIXED_SHARE of the step, from a line
fitted to this scheduler's own steps (tokens, seconds); the machine, the
threads and the load it runs under are in the fit, no constant is.

The step's prompt tokens are shared out in equal parts (`share`): a request
that joins behind a long prompt is not held until that one is read, and of
several that arrive together none waits for the others to be read first
(prefill costs the same per token in any order here, so putting one prompt
ahead only puts the others behind it). Equal parts also suit llama.cpp with
a KV stream per sequence: it takes, per pass, a run of consecutive sequences
with the same number of tokens each, so unequal chunks cost extra passes.
"""

import math

FIXED_SHARE = 0.05   # of a step's time, at most, for its fixed part
DECAY = 0.97         # weight kept by older steps at each new one
FIRST_CHUNK = 128    # until the steps can tell the parts apart
LEAST_CHUNK = 16
LEAST_SPREAD = 0.25  # variance of the steps' token counts the fit needs


class PrefillPace:
    def __init__(self, most: int):
        self.most = most                 # tokens one batch holds
        self.sums = [0.0] * 5            # weighted 1, n, n*n, t, n*t
        self.last = min(most, FIRST_CHUNK)

    def record(self, tokens: int, seconds: float) -> None:
        """One decoded step of `tokens` tokens took `seconds`."""
        w, n, t = self.sums, float(tokens), seconds
        for i, value in enumerate((1.0, n, n * n, t, n * t)):
            w[i] = w[i] * DECAY + value

    def fit(self) -> "tuple[float, float] | None":
        """(fixed seconds, seconds per token), or None while the steps cannot tell them."""
        s1, sn, snn, st, snt = self.sums
        if s1 < 2 or snn / s1 - (sn / s1) ** 2 < LEAST_SPREAD:
            return None       # steps of one size (say, only decoding) say nothing of the parts
        per_token = (s1 * snt - sn * st) / (s1 * snn - sn * sn)
        fixed = (st - per_token * sn) / s1
        if per_token <= 0:
            return None
        return max(fixed, 0.0), per_token

    def chunk(self) -> int:
        """Prompt tokens for the next step, all reading slots together."""
        fitted = self.fit()
        if fitted is not None:
            fixed, per_token = fitted
            tokens = math.ceil(fixed * (1 - FIXED_SHARE) / FIXED_SHARE / per_token)
            self.last = max(1, min(self.most, max(LEAST_CHUNK, tokens)))
        return self.last


def share(wanted: "list[int]", budget: int) -> "list[int]":
    """Split `budget` tokens among slots wanting `wanted` each (in arrival order): equal
    parts, none bigger than what its slot wants, what a slot leaves going to the others
    (water-filling); a remainder too small to split goes to the earlier arrivals."""
    given = [0] * len(wanted)
    unmet = [i for i, w in enumerate(wanted) if w > 0]
    while budget and unmet:
        part = max(1, budget // len(unmet))
        for i in list(unmet):
            extra = min(part, wanted[i] - given[i], budget)
            given[i], budget = given[i] + extra, budget - extra
            if given[i] == wanted[i]:
                unmet.remove(i)
            if not budget:
                break
    return given
