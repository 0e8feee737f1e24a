"""One console session: the archive, the engine, the current conversation and settings.

A new conversation is only written to the archive with its first message:
opening the console and leaving, or /new twice, leaves no empty conversations.
Until then its title and system prompt wait in `pending`.
"""

from dataclasses import dataclass

from chatdb.errors import ChatdbError
from chatdb.records import Conversation, Message
from engine.errors import Cancelled

from .. import output
from ..interrupt import Quit, stop_on_sigint
from .frontend import Frontend
from .model_loading import EngineOptions, model_name, swap_engine
from .screen.answer_stream import AnswerStream
from .screen.render import Renderer, Waiting
from .screen.stats import SessionStats, turn_line


@dataclass
class Pending:
    title: str = ""
    system: "str | None" = None


class Session:
    def __init__(self, archive, engine, render: Renderer, options: EngineOptions,
                 system: "str | None" = None, conv_id: "int | None" = None,
                 model_load_s: float = 0.0):
        self.archive, self.engine, self.render = archive, engine, render
        self.options, self.default_system = options, system
        self.conv_id = conv_id
        self.pending = Pending(system=system)
        self.listed: list[int] = []      # conversation ids as numbered by the last /list
        self.hits: list = []             # the last /search's hits
        self.meaning = None              # search by meaning (cli/meaning.MeaningSearch), if any
        self.indexer = None              # embeds what the session writes (BackgroundIndexer)
        self.said_no_index = False       # /search without an index says so once
        self.stats = SessionStats()
        self.stats.model_loaded(model_load_s)
        self.frontend = Frontend()
        self.errors = 0
        self.quitting = False
        self._prepare()

    def failed(self) -> None:
        """Count a line that failed (stdin mode then ends with status 1)."""
        self.errors += 1

    def quit(self) -> None:
        """Leave after the current line (/quit)."""
        self.quitting = True

    def remember_listed(self, conv_ids: list[int]) -> None:
        """The conversations as the last /list numbered them."""
        self.listed = list(conv_ids)

    def forget(self, conv_id: int) -> None:
        """A conversation deleted: the last /list's numbers no longer lead to it."""
        self.listed = [i for i in self.listed if i != conv_id]

    def use_meaning(self, meaning, warn) -> None:
        """Search by meaning with `meaning` (cli/meaning.MeaningSearch), embedding what the
        session writes in the background (problems go to `warn`)."""
        self.meaning = meaning
        self.indexer = meaning.background(warn)

    def first_note_of_no_index(self) -> bool:
        """True the first time only: /search without an index says so once."""
        first, self.said_no_index = not self.said_no_index, True
        return first

    def remember_hits(self, hits: list) -> None:
        """The last /search's hits, numbered for /open."""
        self.hits = list(hits)

    def use_frontend(self, frontend: Frontend) -> None:
        """Ask the user through `frontend` (the terminal's or stdin's) from now on."""
        self.frontend = frontend

    # -- where we are ------------------------------------------------------------

    @property
    def sampling(self):
        """The sampling settings of the next turns: the engine's own (set_sampling changes them)."""
        return self.engine.sampling

    def set_sampling(self, settings) -> None:
        self.engine.set_sampling(settings)

    def conversation(self) -> "Conversation | None":
        return self.archive.conversation(self.conv_id) if self.conv_id is not None else None

    def left_out(self) -> int:
        """How many messages after the system prompt the model no longer sees of the current
        path: left out of the window its last answer had (or its next will have)."""
        conv = self.conversation()
        if conv is None or conv.head_id is None:
            return 0
        return self.engine.window_of(conv.head_id)[0]

    def path(self) -> list[Message]:
        return self.archive.messages(self.conv_id) if self.conv_id is not None else []

    def numbered(self, path: "list[Message] | None" = None) -> list[Message]:
        """The path's messages as numbered on screen: 1, 2, ... (the system prompt has none)."""
        return [m for m in (self.path() if path is None else path) if m.role != "system"]

    def system_prompt(self) -> "str | None":
        if self.conv_id is None:
            return self.pending.system
        path = self.path()
        return path[0].content if path and path[0].role == "system" else None

    def label(self) -> str:
        conv = self.conversation()
        if conv is None:
            return "a new conversation" + (f" {self.pending.title!r}" if self.pending.title else "")
        return f"#{conv.id} {conv.title or '(untitled)'!r}"

    # -- moving ------------------------------------------------------------------

    def start_new(self, title: str = "", system: "str | None" = None) -> None:
        self.conv_id = None
        self.pending = Pending(title, system)

    def set_pending(self, title: "str | None" = None, system: "str | None" = None) -> None:
        """The title or system prompt of the new conversation, saved with its first message."""
        self.pending = Pending(title if title is not None else self.pending.title,
                               system if system is not None else self.pending.system)

    def switch(self, conv_id: int) -> None:
        self.archive.touch(conv_id)  # most recently used: what `chatdb -c` reopens
        self.conv_id = conv_id
        self._prepare()

    def _prepare(self) -> None:
        """Start restoring the conversation's KV while the user types."""
        if self.conv_id is not None:
            self.engine.prepare(self.conv_id)

    def ensure_conversation(self, first_text: str) -> int:
        if self.conv_id is None:
            conv = self.archive.create_conversation(
                self.pending.title or output.title_of(first_text), system_prompt=self.pending.system,
                model=model_name(self.engine))
            self.conv_id = conv.id
        return self.conv_id

    # -- answering -----------------------------------------------------------------

    def send(self, text: str) -> None:
        pending = self.pending if self.conv_id is None else None
        conv_id = self.ensure_conversation(text)
        try:
            self._turn(lambda **kw: self.engine.reply(conv_id, text, **kw))
        except ChatdbError:  # e.g. too long for the context: leave no empty conversation
            if pending is not None and not self.numbered():
                self.archive.delete_conversation(conv_id)
                self.conv_id, self.pending = None, pending
            raise

    def answer(self, message_id: int) -> None:
        """Answer an existing message of the current path as a new branch."""
        self._turn(lambda **kw: self.engine.answer(self.conv_id, message_id, **kw))

    def _turn(self, run) -> None:
        stream = AnswerStream(self.render, Waiting(self.render, "thinking"))
        stream.waiting.start()
        try:
            with stop_on_sigint() as stopped:
                result = run(on_text=stream, cancelled=stopped, progress=stream.progress)
        except KeyboardInterrupt:  # a second Ctrl-C: the answer could not be kept
            stream.finish(interrupted=True)
            self.render.warning("stopped at once; this answer was not kept")
            return
        except Cancelled:  # stopped while the prompt was read: no empty answer is kept
            stream.waiting.stop()
            self.render.note("stopped before the answer began; your message is kept")
            if stopped.quit_status:
                raise Quit(stopped.quit_status - 128) from None
            return
        except BaseException:
            stream.waiting.stop()
            raise
        stream.finish(result.status == "interrupted")
        if self.indexer is not None:  # embedded while the answer is read, at low priority
            self.indexer.poke()
        self.render.note(turn_line(result))
        self.stats.add(result)
        if stopped.quit_status:  # SIGTERM / SIGHUP: the answer is kept; now leave as /quit does
            raise Quit(stopped.quit_status - 128)

    # -- the model -----------------------------------------------------------------

    def replace_engine(self, options: EngineOptions) -> None:
        """Load another model; if it fails, the current one is loaded back (and the error raised)."""
        self.engine, seconds, error = swap_engine(self.render, self.archive, self.engine,
                                                  self.options, options)
        if error is not None:
            raise error
        self.options = options
        self.stats.model_loaded(seconds)
        self._prepare()

    def close(self) -> None:
        """Wait for the KV of this session to be stored, then let the model go."""
        with Waiting(self.render, "storing KV state"):
            self.engine.close()
            if self.indexer is not None:
                self.indexer.close()
        if self.meaning is not None:
            self.meaning.close()
        self.archive.close()
