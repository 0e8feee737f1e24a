"""HTTP connections with bounds: how long a request's head may take, and how many stay open.

uvicorn closes a connection idle after a response (keep-alive, KEEP_ALIVE_S)
but not one that never sends a whole request head: a client that opens
sockets and sends nothing, or half a header, held each open for minutes, and
about a thousand of them (the process's file limit) left no socket for
anyone else. Here:

- a request's head must arrive within HEAD_TIMEOUT_S of the connection's
  start or of its previous response, else the connection is closed;
- at most `max_connections` stay open: a new one beyond that closes the
  oldest that has no request in flight (idle or still sending its head), so
  a flood of idle sockets cannot keep `/health` or a real client out;
- a request body must arrive within BODY_TIMEOUT_S (app.py: 408).
"""

import resource
import time

from uvicorn.protocols.http.h11_impl import H11Protocol

HEAD_TIMEOUT_S = 10
BODY_TIMEOUT_S = 60
KEEP_ALIVE_S = 5
MAX_CONNECTIONS = 1024
FILES_KEPT = 64   # descriptors left for the model, the archive and its journal


def connection_limit(wanted: int = MAX_CONNECTIONS) -> int:
    """`wanted`, within the open-file limit (its soft part raised to the hard one first)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft - FILES_KEPT))


def bounded_protocol(max_connections: int, head_timeout: float = HEAD_TIMEOUT_S):
    """uvicorn's h11 protocol class with these bounds (uvicorn.Config(http=...))."""
    return type("BoundedH11Protocol", (_Bounded,), {"max_connections": max_connections,
                                                    "head_timeout": head_timeout})


class _Bounded(H11Protocol):
    max_connections = MAX_CONNECTIONS
    head_timeout = HEAD_TIMEOUT_S

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self.opened = time.monotonic()
        self._head_timer = None
        self._await_head()
        if len(self.connections) > self.max_connections:
            self._make_room()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.in_flight:
            self._cancel_head_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._await_head()

    def connection_lost(self, exc) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    @property
    def in_flight(self) -> bool:
        """A request's head has come and its response is not complete."""
        return self.cycle is not None and not self.cycle.response_complete

    def _await_head(self) -> None:
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self.head_timeout, self._head_late)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if not self.in_flight:
            self.drop()

    def drop(self) -> None:
        if not self.transport.is_closing():
            self.transport.close()

    def _make_room(self) -> None:
        """Close the oldest connections without a request in flight (this one last)."""
        open_ = [c for c in self.connections if not c.transport.is_closing()]
        waiting = sorted((c for c in open_ if isinstance(c, _Bounded) and not c.in_flight),
                         key=lambda c: c.opened)
        for connection in waiting[: len(open_) - self.max_connections]:
            connection.drop()
