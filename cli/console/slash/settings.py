"""/system, /model, /set: what the next answers are made with."""

import dataclasses
import difflib

from ...model_options import SETTINGS, setting_value
from ..model_loading import EngineOptions, backend_phrase, model_phrase
from .arguments import UsageError
from .command import Command


def system(session, arg: str) -> None:
    r = session.render
    if not arg:
        current = session.system_prompt()
        r.line(f"system prompt: {current}" if current else "no system prompt")
        return
    if session.conv_id is None:
        session.set_pending(system=arg)
        r.note("system prompt set for this new conversation")
    elif session.numbered():
        old = session.label()
        session.start_new(system=arg)
        r.note(f"{old} already has messages, made under its own system prompt: "
               "started a new conversation with this one (/switch goes back)")
    else:  # saved but empty: give it a new root
        session.archive.add_message(session.conv_id, "system", arg, parent_id=None)
        r.note("system prompt set")


def model(session, arg: str) -> None:
    r = session.render
    if arg:
        old = model_phrase(session.engine)
        options = dataclasses.replace(session.options, model=arg)
        session.replace_engine(options)
        r.note(f"switched from {old}; stored KV of the other model is kept, and not used by this one")
    r.line(f"model: {model_phrase(session.engine)}")
    r.line(f"file: {session.engine.model.path}")
    r.line(f"runs on: {backend_phrase(session.engine)}")
    speculative = session.engine.describe().get("speculative") or {}
    if speculative:
        draft = speculative.get("draft_model")
        r.line(f"speculative decoding: {speculative.get('mode')}" + (f" (draft model {draft})" if draft else ""))
        index = speculative.get("archive_index") or {}
        if index.get("loaded"):
            r.line(f"archive draft index: {index['answers']:,} answers, {index['tokens']:,} tokens "
                   f"in {index['bytes'] / 1e6:.1f} MB")


def set_(session, arg: str) -> None:
    r = session.render
    if not arg:
        for name in SETTINGS:
            value = getattr(session.sampling, name)
            r.line(f"{name}={'none' if value is None else value}")
        return
    changes = dict(parse_setting(item) for item in arg.split())
    session.set_sampling(dataclasses.replace(session.sampling, **changes))
    r.note("set " + " ".join(f"{k}={'none' if v is None else v}" for k, v in changes.items()))


def parse_setting(item: str):
    name, eq, text = item.partition("=")
    name = name.strip().replace("-", "_").casefold()
    if name not in SETTINGS:
        guess = difflib.get_close_matches(name, list(SETTINGS), n=1, cutoff=0.5)
        hint = f"did you mean {guess[0]}? " if guess else ""
        raise UsageError(f"unknown setting {name!r}; {hint}settings: {', '.join(SETTINGS)}")
    if not eq or not text:
        raise UsageError(f"write {name}=VALUE")
    if name == "seed" and text.casefold() == "none":
        return name, None
    try:
        return name, setting_value(name, text)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


COMMANDS = [
    Command("system", "[TEXT]", "show the system prompt, or set it (see /help system)", system,
            details="In a conversation without messages, TEXT becomes its system prompt. One\n"
                    "with messages keeps the prompt they were written under: TEXT starts a\n"
                    "new conversation instead (its messages and KV depend on the prompt)."),
    Command("model", "[PATH]", "show the model, or load another GGUF file", model, complete="path",
            details="Conversations go on with the new model; the KV state stored for the\n"
                    "other model stays in the archive, unused, and serves it again later."),
    Command("set", "[NAME=VALUE ...]", "show or change sampling: " + ", ".join(SETTINGS), set_,
            complete="setting", details="seed=none samples at random again."),
]
