"""A turn asked for by a client: its whole message list, placed in the tree, then answered.

The front-end (the HTTP server) builds a TurnRequest; the engine's thread
(scheduler.py) places its messages (chatdb.message_match: only what the archive lacks is added)
and answers the last one, streaming through `on_text` and ending with
`on_done(result)` or `on_error(exception)`. Both callbacks run on the
engine's thread.
"""

import threading
from dataclasses import dataclass, field

from chatdb.message_match import Placement

from ..llama.sampling import SamplingSettings


@dataclass
class TurnRequest:
    messages: list[tuple[str, str]]       # (role, content), system/user/assistant
    sampling: SamplingSettings
    stop: list[str] = field(default_factory=list)
    title: str = ""
    meta: dict = field(default_factory=dict)    # of a new conversation: which client made it
    tags: list = field(default_factory=list)    # given to the conversation it lands in
    on_text: "callable" = None
    on_done: "callable" = None
    on_error: "callable" = None
    on_logprob: "callable" = None         # each token's log-probabilities, where asked
    cancelled: threading.Event = field(default_factory=threading.Event)
    # A completion's prompt tokens: answered as they are, nothing placed or stored.
    prompt: "list[int] | None" = None
    # More answers to the same prompt (n > 1), each with its own sampling and callbacks:
    # computed beside this one from the prompt's KV, read once, and stored as siblings.
    siblings: list = field(default_factory=list)
    # Whose request it is on a server several people share (None: the archive's own
    # user): it matches and resumes only that user's conversations and KV.
    owner: "str | None" = None
    share_prefix: bool = False            # a root system prompt anyone stored may be matched

    @property
    def answers(self) -> int:
        return 1 + len(self.siblings)


@dataclass
class TurnOutcome:
    placement: Placement
    result: "object"          # engine.batching.job.TurnResult
    # How it was batched: the most sequences one of its forward passes held, the passes
    # that read its prompt, and the fewest sequences one of those held.
    batch: dict = field(default_factory=dict)


class TurnCancelled(Exception):
    """The client went away before its turn began: nothing was written."""

