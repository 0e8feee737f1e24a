"""Showing messages: whole (/history, /open) or as one-line previews (welcome, /switch)."""

from chatdb.records import Message

from ... import output

RECENT = 2             # messages shown on opening a conversation
PREVIEW_WIDTH = 100
ROLE_NAMES = {"user": "you", "assistant": "assistant", "system": "system"}


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def preview(text: str, width: int = PREVIEW_WIDTH) -> str:
    return output.shorten(text, width)


def heading(r, n: "int | None", m: Message, marked: bool = False, unseen: bool = False) -> str:
    number = f"[{n}] " if n is not None else ""
    about = f"{number}{ROLE_NAMES.get(m.role, m.role)} · {output.minute(m.created_at)}"
    if m.status != "complete":
        about += f" · {m.status}"
    if unseen:
        about += " · no longer seen by the model"
    return r.bold(about + "  ◀") if marked else r.dim(about)


def show_message(r, n: "int | None", m: Message, marked: bool = False,
                 unseen: bool = False) -> None:
    r.line(heading(r, n, m, marked, unseen))
    r.line(output.safe(m.content).rstrip())


def show_preview(r, n: int, m: Message) -> None:
    r.line(r.dim(f"[{n}] {ROLE_NAMES.get(m.role, m.role)}: ") + preview(m.content))


def show_recent(session, about: str) -> None:
    """`about` with the message count, then the last exchange as previews."""
    numbered = session.numbered()
    r = session.render
    r.note(f"{about} · {plural(len(numbered), 'message')}")
    if len(numbered) > RECENT:
        r.line(r.dim(f"… {len(numbered) - RECENT} earlier (/history shows them)"))
    for n, m in list(enumerate(numbered, 1))[-RECENT:]:
        show_preview(r, n, m)
