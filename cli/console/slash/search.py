"""/search QUERY and /open K: find a message anywhere, then go there."""

from chatdb.search.fulltext import MARK_END, MARK_START, mark
from chatdb.search.hybrid import BY, search
from chatdb.search.tag_terms import split_tags

from ... import output
from ..screen.render import MARKED
from ..screen.tree_view import children_map
from ..screen.views import show_message, show_preview
from .arguments import UsageError, whole_number
from .command import Command

HITS = 10
PLAIN_MARK = "**"  # around matched words without colour, as `chatdb search` does


def search_(session, arg: str) -> None:
    asked, arg = _by(arg)
    if not arg:
        raise UsageError("give the words to look for")
    r = session.render
    by, note = session.meaning.choose_by(asked) if session.meaning else ("words", None)
    if note and session.first_note_of_no_index():
        r.note(note)
    words, tags = split_tags(arg)   # tag:NAME keeps to conversations with that tag
    if not words.strip():
        raise UsageError("give the words to look for (tag:NAME only narrows a search)")
    meaning = session.meaning.query(words) if by != "words" and words else None
    session.remember_hits(search(session.archive.conn, words, by=by, meaning=meaning,
                                 limit=HITS, tags=tags))
    if not session.hits:
        r.line(f"no messages match {arg!r}")
        return
    for k, hit in enumerate(session.hits, 1):
        title = output.one_line(hit.title or "") or "(untitled)"
        about = f"#{hit.conversation_id} {title} · {hit.role} · {output.minute(hit.created_at)}"
        r.line(f"{r.bold(f'{k:>2}')}  {r.dim(about)}")
        r.line(f"    {snippet(hit.snippet, r.color)}")
    r.note("/open K opens hit K's conversation at that message")


def _by(arg: str) -> "tuple[str | None, str]":
    """`--by words|meaning|both` at the start of the argument, and the query after it."""
    words = arg.split(maxsplit=2)
    if not words or words[0] != "--by":
        return None, arg
    if len(words) < 2 or words[1] not in BY:
        raise UsageError(f"--by takes one of {', '.join(BY)}")
    return words[1], words[2] if len(words) > 2 else ""


def snippet(text: str, color: bool) -> str:
    text = " ".join(output.safe(text, keep=MARK_START + MARK_END).split())
    return mark(text, MARKED, output.RESET) if color else mark(text, PLAIN_MARK, PLAIN_MARK)


def open_(session, arg: str) -> None:
    if not session.hits:
        raise UsageError("no search yet: /search QUERY first")
    k = whole_number(arg, "K") if arg else 0
    if not 1 <= k <= len(session.hits):
        raise UsageError(f"give a hit number from 1 to {len(session.hits)}")
    hit = session.hits[k - 1]
    if hit.conversation_id is None:
        raise UsageError("no conversation holds that message any more")
    session.switch(hit.conversation_id)
    _reach(session, hit.message_id)
    show_around(session, hit.message_id)


def _reach(session, message_id: int) -> None:
    """Keep the head if the message is on the current path, else go to its branch's newest tip."""
    if any(m.id == message_id for m in session.path()):
        return
    kids = children_map(session.archive.tree(session.conv_id))
    tip = session.archive.message(message_id)
    while kids.get(tip.id):
        tip = kids[tip.id][-1]
    session.archive.set_head(session.conv_id, tip.id)
    session.render.note("that message is on another branch: the head moved there")


def show_around(session, message_id: int) -> None:
    r = session.render
    numbered = session.numbered()
    n = next((i for i, m in enumerate(numbered, 1) if m.id == message_id), None)
    r.note(f"opened {session.label()} at " + (f"message {n}" if n else "its system prompt"))
    if n is None:
        return
    if n > 1:
        show_preview(r, n - 1, numbered[n - 2])
    show_message(r, n, numbered[n - 1], marked=True)
    if n < len(numbered):
        show_preview(r, n + 1, numbered[n])
        follow = len(numbered) - n
        r.note(f"{follow} message{'s follow' if follow != 1 else ' follows'}; /fork {n} "
               "continues from here in a new conversation")


COMMANDS = [
    Command("search", "[--by words|meaning|both] QUERY",
            "search every message of every conversation, best first", search_,
            details='By words and by meaning (where the archive has an index by meaning: '
                    '`chatdb index`), the two rankings fused; --by picks one. FTS5 syntax works: '
                    '"a phrase", prefix*, OR, NOT. Hits are numbered for /open.'),
    Command("open", "K", "open search hit K's conversation at that message", open_, complete="hit",
            details="If the message is on another branch, the head moves to that branch."),
]
