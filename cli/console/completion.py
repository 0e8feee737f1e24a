"""Tab completion: slash commands, then what each command takes.

A command's `complete` names its argument's kind: conversation (titles and
#ids), message / user_message (numbers of the current path), hit (numbers
of the last /search), setting (NAME=), path (files), command (for /help), tag
(the archive's tags), own_tag (the current conversation's).
"""

from prompt_toolkit.completion import Completer, Completion, PathCompleter
from prompt_toolkit.document import Document

from .screen.views import preview
from .slash import table
from .slash.settings import SETTINGS

RECENT_CONVERSATIONS = 200   # titles offered; /switch itself looks through all


class ConsoleCompleter(Completer):
    def __init__(self, session):
        self.session = session
        self.paths = PathCompleter(expanduser=True)

    def get_completions(self, document: Document, complete_event):
        text = document.text_before_cursor
        if not text.startswith("/") or text.startswith("//") or "\n" in text:
            return
        if " " not in text:
            yield from self.command_names(text[1:], prefix="/")
            return
        name, _, arg = text[1:].partition(" ")
        command = table.by_name().get(name.casefold())
        kind = command.complete if command else ""
        if kind == "path":
            yield from self.paths.get_completions(Document(arg, len(arg)), complete_event)
        elif kind:
            yield from getattr(self, kind)(arg.lstrip())

    def command_names(self, word: str, prefix: str = ""):
        for name in table.names():
            if name.startswith(word.casefold()):
                command = table.by_name()[name]
                yield Completion(prefix + name, -len(word) - len(prefix),
                                 display=command.usage, display_meta=command.summary)

    def command(self, arg: str):
        yield from self.command_names(arg)

    def conversation(self, arg: str):
        rows = self.session.archive.list_conversations(limit=RECENT_CONVERSATIONS)
        titles = [r.title.casefold() for r in rows]
        for row in rows:
            tag = f"#{row.id}"
            unique = titles.count(row.title.casefold()) == 1 and row.title.strip()
            if arg.startswith("#") or arg.isdigit():
                if tag.startswith(arg) or str(row.id).startswith(arg):
                    yield Completion(tag, -len(arg), display=f"{tag} {row.title}")
            elif arg.casefold() in row.title.casefold():
                yield Completion(row.title if unique else tag, -len(arg),
                                 display=row.title or "(untitled)", display_meta=tag)

    def tag(self, arg: str):
        yield from self._tags(arg, [name for name, _ in self.session.archive.tags.counts()])

    def own_tag(self, arg: str):
        conv_id = self.session.conv_id
        yield from self._tags(arg, self.session.archive.tags.of(conv_id) if conv_id else [])

    def _tags(self, arg: str, names: list[str]):
        """The tag being written (the last word, or a quoted one still open)."""
        word = arg[arg.rfind('"'):] if arg.count('"') % 2 else arg.split(" ")[-1]
        typed = word.lstrip('"').casefold()
        for name in names:
            if name.casefold().startswith(typed):
                text = f'"{name}"' if " " in name or word.startswith('"') else name
                yield Completion(text, -len(word), display=name)

    def message(self, arg: str, user_only: bool = False):
        for n, m in enumerate(self.session.numbered(), 1):
            if str(n).startswith(arg) and (m.role == "user" or not user_only):
                yield Completion(str(n), -len(arg), display=f"{n} {m.role}",
                                 display_meta=preview(m.content, 60))

    def user_message(self, arg: str):
        if " " not in arg:
            yield from self.message(arg, user_only=True)

    def hit(self, arg: str):
        for k, hit in enumerate(self.session.hits, 1):
            if str(k).startswith(arg):
                yield Completion(str(k), -len(arg), display=f"{k} #{hit.conversation_id}",
                                 display_meta=preview(hit.title or "", 60))

    def setting(self, arg: str):
        word = arg.split(" ")[-1]
        if "=" in word:
            return
        for name in SETTINGS:
            if name.startswith(word.casefold()):
                yield Completion(f"{name}=", -len(word), display_meta=str(
                    getattr(self.session.sampling, name)))
