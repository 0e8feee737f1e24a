"""From `chatdb [chat] [CONV] [-c] ...` to a running console, and back out.

The conversation is looked up before the model loads, so a wrong CONV fails
at once. Leaving always waits for the KV state to be stored (engine.close).
"""

import sys

from .. import output, refs
from ..interrupt import quit_on_signals
from ..meaning import MeaningSearch
from ..model_options import sampling_from
from ..options import open_archive
from .model_loading import EngineOptions, backend_phrase, load_engine, model_phrase
from .screen.render import Renderer
from .screen.views import show_recent
from .session import Session
from .slash.arguments import UsageError


def run(args) -> int:
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    try:
        session = open_session(args, interactive)
    except UsageError as exc:
        output.error(str(exc))
        return 2
    try:
        if interactive:
            from .app import run as loop  # prompt_toolkit: only for a terminal
        else:
            from .stdin_mode import run as loop
        with quit_on_signals():  # SIGTERM / SIGHUP: unwind (the terminal restored), then close
            return loop(session)
    finally:
        session.close()


def open_session(args, interactive: bool) -> Session:
    render = Renderer()
    archive = open_archive(args, create=True)
    try:
        conv_id = choose_conversation(archive, args, render)
        options = EngineOptions(args.model, args.ctx, not args.no_kv, args.draft, args.draft_model,
                                args.threads, args.kv_type)
        sampling = sampling_from(args)
        engine, seconds = load_engine(render, archive, options, sampling)
    except BaseException:
        archive.close()
        raise
    session = Session(archive, engine, render, options, system=args.system, model_load_s=seconds)
    try:
        session.use_meaning(MeaningSearch(archive, args.embed_model), render.warning)
    except BaseException:
        session.close()
        raise
    if conv_id is not None:
        session.switch(conv_id)
    welcome(session, interactive)
    return session


def choose_conversation(archive, args, render: Renderer) -> "int | None":
    conv = getattr(args, "conv", None)
    if conv is not None and args.continue_last:
        raise UsageError("give CONV or -c, not both")
    if args.system and (conv is not None or args.continue_last):
        raise UsageError("--system starts a new conversation; it cannot be given with -c or CONV")
    if conv is not None:
        return refs.conversation(archive, conv).id
    if args.continue_last:
        latest = archive.latest_conversation()
        if latest is None:
            render.note("no conversation to continue yet: starting a new one")
        return latest.id if latest else None
    return None


def welcome(session: Session, interactive: bool) -> None:
    r, engine = session.render, session.engine
    where = session.archive.db_path
    r.note(f"chatdb · {model_phrase(engine)} · {backend_phrase(engine)} · archive {where}")
    if session.conv_id is None:
        r.note("a new conversation · /help lists the commands · Ctrl-D quits")
    elif interactive:
        show_recent(session, f"continuing {session.label()}")
    else:
        r.note(f"continuing {session.label()}")
