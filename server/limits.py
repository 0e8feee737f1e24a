"""Per key limits: requests at once and tokens a minute, refused with 429 and Retry-After.

A request is counted from its head to its last byte (a stream's too); its
tokens (prompt and answer, as `usage` says) are counted when it ends, over
a sliding minute. A user over either limit is answered 429 in the OpenAI
error shape (code "rate_limit_exceeded", type "requests" or "tokens", as OpenAI's), with Retry-After in whole seconds:
1 for requests at once, else when enough of the last minute's tokens age out.
"""

import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from .errors import APIError
from .users import User

WINDOW_S = 60.0


@dataclass
class Tally:
    """One user's counts, for the limits and /stats."""
    running: int = 0
    requests: int = 0
    refused: int = 0
    tokens: int = 0
    spent: deque = field(default_factory=deque)   # (monotonic time, tokens) of the last minute

    def last_minute(self, now: float) -> int:
        while self.spent and self.spent[0][0] <= now - WINDOW_S:
            self.spent.popleft()
        return sum(n for _, n in self.spent)


class Limits:
    def __init__(self, concurrent: "int | None" = None, tokens_per_minute: "int | None" = None,
                 clock=time.monotonic):
        self.concurrent, self.tokens_per_minute, self.clock = concurrent, tokens_per_minute, clock
        self.tallies: dict = {}
        self._lock = threading.Lock()

    def enter(self, user: User) -> None:
        """Count a request in; APIError 429 where the user is over a limit."""
        with self._lock:
            tally = self.tallies.setdefault(user.name, Tally())
            most = user.concurrent or self.concurrent
            if most is not None and tally.running >= most:
                tally.refused += 1
                raise _too_many("requests", f"{most} requests at once", 1)
            per_minute = user.tokens_per_minute or self.tokens_per_minute
            now = self.clock()
            if per_minute is not None and tally.last_minute(now) >= per_minute:
                tally.refused += 1
                raise _too_many("tokens", f"{per_minute} tokens a minute",
                                self._wait(tally, per_minute, now))
            tally.running += 1
            tally.requests += 1

    def leave(self, user: User) -> None:
        with self._lock:
            self.tallies[user.name].running -= 1

    def spend(self, user: "User | None", tokens: int) -> None:
        """A finished request's tokens."""
        if user is None or tokens <= 0:
            return
        with self._lock:
            tally = self.tallies.setdefault(user.name, Tally())
            tally.tokens += tokens
            tally.spent.append((self.clock(), tokens))

    def _wait(self, tally: Tally, per_minute: int, now: float) -> int:
        """Seconds until the last minute's tokens fall under `per_minute`."""
        total = tally.last_minute(now)
        for at, n in tally.spent:
            total -= n
            if total < per_minute:
                return max(1, math.ceil(at + WINDOW_S - now))
        return 1

    def stats(self) -> dict:
        """Each user's counts (the archive's own user as "(owner)")."""
        now = self.clock()
        with self._lock:
            return {(name or "(owner)"): {"running": t.running, "requests": t.requests,
                                          "refused": t.refused, "tokens": t.tokens,
                                          "tokens_last_minute": t.last_minute(now)}
                    for name, t in self.tallies.items()}


def _too_many(kind: str, what: str, retry_after: int) -> APIError:
    return APIError(429, f"rate limit reached: this key may make {what}; retry after "
                         f"{retry_after} s", type=kind, code="rate_limit_exceeded",
                    headers={"retry-after": str(retry_after)})
