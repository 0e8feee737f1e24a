"""/stats, /export, /quit."""

from pathlib import Path

from chatdb.storage import private_files
from chatdb.transfer.export_markdown import conversation_markdown

from ..model_loading import backend_phrase, model_phrase, threads_phrase
from ..screen.views import plural
from .arguments import UsageError
from .command import Command


def size(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:,} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    return ""


def archive_bytes(path: "Path | None") -> int:
    """The database file with its write-ahead log, as it takes disk space now."""
    if path is None:
        return 0
    files = [path, path.with_name(path.name + "-wal")]
    return sum(f.stat().st_size for f in files if f.exists())


def threads_reason(engine) -> str:
    """What the threads are now and why; chosen again before every turn."""
    info = engine.describe()
    return f"{threads_phrase(info)}: {info['threads']['reason']}"


def budget_phrase(archive, stored: int) -> str:
    budget = archive.kv_budget.get()
    share = f", {stored / budget.bytes:.0%} used" if budget.bytes else ""
    return f"{budget.describe()}{share}"


def stats(session, arg: str) -> None:
    if arg:
        raise UsageError("takes no arguments")
    session.engine.flush()  # count the KV of the last answer too
    usage = session.archive.kv.usage()
    ratio = f", {usage.raw_bytes / usage.stored_bytes:.2f}x compressed" if usage.stored_bytes else ""
    rows = session.stats.rows() + [
        ("archive", f"{size(archive_bytes(session.archive.db_path))} "
                    f"({plural(session.archive.count_conversations(), 'conversation')}, "
                    f"{plural(session.archive.count_messages(), 'message')})"),
        ("KV stored", f"{size(usage.stored_bytes)} in {plural(usage.segments, 'segment')}{ratio}"),
        ("KV budget", budget_phrase(session.archive, usage.stored_bytes)),
        ("model", model_phrase(session.engine)),
        ("backend", backend_phrase(session.engine)),
        ("threads", threads_reason(session.engine)),
    ]
    width = max(len(name) for name, _ in rows)
    r = session.render
    for name, value in rows:
        r.line(f"{r.dim(name.ljust(width))}  {value}")


def export(session, arg: str) -> None:
    conv = session.conversation()
    if conv is None:
        raise UsageError("this conversation is not saved yet: send a message first")
    text = conversation_markdown(conv, session.path())
    if not arg:
        session.render.line(text.rstrip())
        return
    target = Path(arg).expanduser()
    private_files.write_atomic(target, text)  # 0600, whole or not at all, as `export -o`
    session.render.note(f"wrote {session.label()} to {target} ({size(len(text.encode()))})")


def quit_(session, arg: str) -> None:
    session.quit()


COMMANDS = [
    Command("stats", "", "this session's figures: speed, first token, KV restores, storage", stats),
    Command("export", "[FILE]", "the current path as Markdown, to FILE or the screen", export,
            complete="path"),
    Command("quit", "", "leave (after the KV state is stored); Ctrl-D too", quit_,
            aliases=("exit",)),
]
