"""One thing the user entered: a slash command, or a message to answer.

Errors are said in one line and the session goes on; they are counted, so
that stdin mode can end with status 1 when something failed.
"""


from chatdb.errors import ChatdbError
from chatdb.storage import dbapi
from chatdb.storage.connection import describe

from ..text_input import check
from .slash import table


def handle(session, text: str) -> None:
    if not text.strip():
        return
    try:
        # a terminal hands over bytes that are not UTF-8 as lone surrogates
        check(text, "the command" if text.startswith("/") and not text.startswith("//")
              else "the message")
        if text.startswith("//"):
            session.send(text[1:])
        elif text.startswith("/"):
            table.run(session, text.strip())
        else:
            session.send(text)
    except ChatdbError as exc:
        fail(session, str(exc))
    except OSError as exc:
        fail(session, f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else str(exc))
    except dbapi.Error as exc:
        fail(session, f"{session.archive.db_path}: {describe(exc, session.archive.db_path)}")


def fail(session, message: str) -> None:
    session.failed()
    session.render.error(message)
