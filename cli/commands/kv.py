"""`chatdb kv`: the archive's KV budget, what it stores, and what is dropped."""

import os
from dataclasses import asdict

from chatdb.kv.budget import format_size, parse_size
from chatdb.kv.report import report
from engine.kv.kv_type import KV_TYPES

from .. import output
from ..options import add_command, open_archive

DESCRIPTION = """\
Show the archive's KV budget, the KV state stored, the file's size and the
rest of it (text, tokens, the search index), the conversations holding the
most KV, and how often the latest turns that reopened a chat resumed it from
the archive.

The budget bounds the KV the archive keeps (the default: 4 GiB, or a tenth
of the disk the archive is on where that is less). When storing would pass
it, KV is dropped, never messages: first what is worth least per byte (used
least recently, saving the least compute), from the end of a path back, so
a chat may keep the KV of its first messages and recompute the rest. A chat
whose KV was dropped answers exactly as before, after reading it again, and
is stored again when used. $CHATDB_KV_BUDGET overrides the budget for one
process.

JSON: {budget_bytes (null: unlimited), budget_source, budget, stored_bytes,
segments, file_bytes, wal_bytes, free_bytes, rest_bytes, text_bytes,
token_bytes, conversations: [{id, title, kv_bytes, tokens}], reopened:
{turns, from_archive, restored_tokens, reusable_tokens}}"""

BUDGET_DESCRIPTION = """\
Set the archive's KV budget: SIZE such as 500MB or 2GB (powers of 1000),
4GiB or 512M (powers of 1024), 0 (keep no KV) or unlimited; without SIZE,
show it. Every process on the archive keeps it; a budget below what is
stored applies at the next store, or now with `chatdb kv prune`.

JSON: {budget_bytes, budget_source, budget, stored_bytes}"""

TYPE_DESCRIPTION = """\
Set the type the KV cache holds its values in, for every process on this
archive (--kv-type and $CHATDB_KV_TYPE override it for one): f16, the
default, or q8_0, about 0.6 of f16's bytes stored per token, computed with
flash attention (which makes a CPU slower: docs/kv-budget.md gives the
measured cost). KV stored under one type is never restored under another: each chat
is read again once, and the other type's KV is dropped first as it goes
unused. Without TYPE, show it.

JSON: {kv_type, source}"""

PRUNE_DESCRIPTION = """\
Apply the KV budget now: drop what is worth least until the KV stored fits
it (never messages), then give the file's free pages back to the file system
and truncate the write-ahead log. After deleting conversations, this returns
the space they held.

JSON: {dropped, freed_bytes, file_before, file_after, stored_bytes}"""


def register(subparsers) -> None:
    parser = add_command(subparsers, "kv", run, help="the KV budget and what the archive stores",
                         description=DESCRIPTION)
    parser.add_argument("--top", type=int, default=10, metavar="N",
                        help="conversations listed (default 10)")
    actions = parser.add_subparsers(title="actions", metavar="ACTION")
    budget = add_command(actions, "budget", run_budget, help="show or set the KV budget",
                         description=BUDGET_DESCRIPTION)
    budget.add_argument("size", nargs="?", metavar="SIZE")
    kv_type = add_command(actions, "type", run_type, help="show or set the archive's KV type",
                          description=TYPE_DESCRIPTION)
    kv_type.add_argument("type", nargs="?", choices=list(KV_TYPES), metavar="TYPE")
    add_command(actions, "prune", run_prune, help="apply the KV budget now and give back the free space",
                description=PRUNE_DESCRIPTION)


def run(args) -> int:
    with open_archive(args) as archive:
        figures = report(archive, archive.kv_budget.get(), top=max(0, args.top))
    if args.json:
        output.print_json(figures.to_dict())
    else:
        _print(figures)
    return 0


def run_budget(args) -> int:
    size = parse_size(args.size) if args.size is not None else ...
    with open_archive(args, create=size is not ...) as archive:   # a budget may come first
        if size is not ...:
            with archive.transaction():
                archive.kv_budget.set(size)
        budget = archive.kv_budget.get()
        figures = report(archive, budget, top=0)
    if args.json:
        output.print_json({"budget_bytes": budget.bytes, "budget_source": budget.source,
                           "budget": budget.describe(), "stored_bytes": figures.stored_bytes})
        return 0
    output.print_text(f"KV budget: {budget.describe()}; {format_size(figures.stored_bytes)} stored")
    if budget.source != "archive" and size is not ...:
        output.print_text(f"(this process keeps ${budget.source} instead)")
    elif budget.bytes is not None and figures.stored_bytes > budget.bytes:
        output.print_text("more is stored than that: `chatdb kv prune` drops the rest now, "
                          "else the next store does")
    return 0


def run_type(args) -> int:
    from engine.kv.kv_type import DEFAULT, ENV, KEY  # loads llama.cpp's constants

    with open_archive(args, create=args.type is not None) as archive:
        if args.type is not None:
            with archive.transaction():
                archive.settings.put(KEY, args.type)
        stored = archive.settings.get(KEY)
    name, source = ((os.environ[ENV], f"${ENV}") if os.environ.get(ENV) else
                    (stored, "archive") if stored else (DEFAULT, "default"))
    if args.json:
        output.print_json({"kv_type": name, "source": source})
    else:
        output.print_text(f"KV type: {name} ({'the default' if source == 'default' else 'from ' + source})")
    return 0


def run_prune(args) -> int:
    with open_archive(args) as archive:
        pruned = archive.kv_keeping.prune()
        left = report(archive, archive.kv_budget.get(), top=0).stored_bytes
    if args.json:
        output.print_json({**asdict(pruned), "stored_bytes": left})
    else:
        output.print_text(f"{pruned.describe()}; {format_size(left)} of KV stored")
    return 0


def _print(r) -> None:
    color = output.use_color()
    share = f" ({r.stored_bytes / r.budget_bytes:.0%} of the budget)" if r.budget_bytes else ""
    rows = [
        ("KV budget", r.budget),
        ("KV stored", f"{format_size(r.stored_bytes)} in {r.segments:,} segments{share}"),
        ("file", f"{format_size(r.file_bytes)}: KV {format_size(r.stored_bytes)}, "
                 f"free pages {format_size(r.free_bytes)}, the rest {format_size(r.rest_bytes)} "
                 f"(text {format_size(r.text_bytes)}, tokens {format_size(r.token_bytes)}, "
                 f"the search index and the rest of the tables)"
                 + (f"; write-ahead log {format_size(r.wal_bytes)}" if r.wal_bytes else "")),
        ("reopened", reopened_phrase(r.reopened)),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        output.print_text(f"{output.dim(name.ljust(width), color)}  {value}")
    if r.conversations:
        output.print_text(output.dim("most KV", color))
        id_width = max(len(str(c["id"])) for c in r.conversations)
        for c in r.conversations:
            title = output.shorten(c["title"], output.TITLE_WIDTH) or "(untitled)"
            output.print_text(f"  {c['id']:>{id_width}}  {format_size(c['kv_bytes']):>11}  "
                              f"{c['tokens']:>9,} tokens  {title}")


def reopened_phrase(r: dict) -> str:
    """How the latest turns that reopened a chat got its KV."""
    if not r["turns"]:
        return "no chat reopened yet"
    share = (f" ({r['restored_tokens'] / r['reusable_tokens']:.0%} of their tokens)"
             if r["reusable_tokens"] else "")
    return (f"of the latest {r['turns']} turns that reopened a chat, {r['from_archive']} resumed "
            f"it from the archive{share}")
