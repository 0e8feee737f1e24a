"""From an async request handler to the engine's thread and back.

A Ticket carries one request's turn and its sibling answers (n > 1): the
engine's callbacks (on its thread) put events, tagged with the answer's
index, on one asyncio queue through the event loop, and the handler reads
them. Cancelling the ticket (the client went away) stops the answers at
their next token; what was written is kept, marked interrupted.
"""

import asyncio

from engine.errors import EngineError, PromptTooLong
from engine.batching.turn_request import TurnCancelled, TurnRequest

from .errors import APIError


class Ticket:
    def __init__(self, turn: TurnRequest):
        self.turn = turn
        self.answers = [turn] + list(turn.siblings)
        self.events: asyncio.Queue = asyncio.Queue()
        loop = asyncio.get_running_loop()
        for index, answer in enumerate(self.answers):
            self._connect(answer, index, loop)

    def _connect(self, turn: TurnRequest, index: int, loop) -> None:
        def put(kind, value):
            try:
                loop.call_soon_threadsafe(self.events.put_nowait, (index, kind, value))
            except RuntimeError:   # the event loop is closed (the server stopped): nobody reads
                pass
        turn.on_text = lambda text: put("text", text)
        turn.on_logprob = lambda entry: put("logprob", entry)
        turn.on_done = lambda outcome: put("done", outcome)
        turn.on_error = lambda exc: put("error", exc)

    def cancel(self) -> None:
        for turn in self.answers:
            turn.cancelled.set()

    async def next(self):
        """(index, "text", str), (index, "logprob", entry), (index, "done", TurnOutcome), or
        raises an answer's failure as an APIError."""
        index, kind, value = await self.events.get()
        if kind == "error":
            raise as_api_error(value)
        return index, kind, value

    async def outcomes(self, first) -> list:
        """Every answer's TurnOutcome, in index order, reading on from `first`."""
        done = {}
        index, kind, value = first
        while True:
            if kind == "done":
                done[index] = value
                if len(done) == len(self.answers):
                    return [done[i] for i in range(len(self.answers))]
            index, kind, value = await self.next()


def submit(turns, turn: TurnRequest) -> Ticket:
    ticket = Ticket(turn)
    if not turns.submit(turn):
        raise APIError(503, "the server is busy: every slot and queue place is taken; retry shortly",
                       type="server_error", code="server_busy", headers={"retry-after": "1"})
    return ticket


def as_api_error(exc: Exception) -> APIError:
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, TurnCancelled):   # still waiting when the server began to stop
        return APIError(503, "the server is stopping; retry shortly", type="server_error",
                        code="server_stopping", headers={"retry-after": "5"})
    if isinstance(exc, PromptTooLong):
        return APIError(400, str(exc), param="messages", code="context_length_exceeded")
    if isinstance(exc, EngineError):
        return APIError(500, str(exc), type="server_error", code="engine_error")
    return APIError(500, f"internal error ({type(exc).__name__})",
                    type="server_error", code="internal_error")


async def until_disconnect(receive) -> None:
    """Returns when the client has gone (after the body was read)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def first_or_disconnect(ticket: Ticket, receive):
    """The ticket's next event, or None (and the turn cancelled) if the client goes first."""
    event = asyncio.ensure_future(ticket.next())
    gone = asyncio.ensure_future(until_disconnect(receive))
    try:
        await asyncio.wait({event, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if event.done():
        return event.result()
    ticket.cancel()
    event.cancel()
    return None
