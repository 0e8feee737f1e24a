"""`chatdb warm [CONV ...]`: compute and store the KV of conversations that have none."""

import argparse
from dataclasses import asdict

from chatdb.kv.budget import format_size

from .. import output
from ..model_options import add_kv_type_option
from ..options import add_command, context_size, open_archive, positive_int
from ..progress import ProgressBar
from ..refs import conversation

DESCRIPTION = """\
Compute and store the KV state of conversations that have none (an
imported history, say), so that each then resumes at once instead of being
read whole at its next turn. Several conversations share every forward
pass (--parallel). Without CONV, every conversation; those whose KV is
stored up to their head are skipped, and paths longer than the context are
left out. The most recently used go first, and warming stops before the KV
would pass the archive's budget (`chatdb kv`): the rest are read when next
used. A progress bar is drawn on a terminal only.

JSON: {warmed, already, too_long, over_budget, budget_bytes, computed_tokens,
restored_tokens, most_sequences}"""


def register(subparsers) -> None:
    parser = add_command(subparsers, "warm", run, help="store the KV of conversations that have none",
                         description=DESCRIPTION)
    parser.add_argument("conv", nargs="*", metavar="CONV", help="conversations (default: all)")
    add_warm_options(parser)


def add_warm_options(parser) -> None:
    parser.add_argument("--model", metavar="PATH", default=argparse.SUPPRESS,
                        help="a GGUF model file (default: $CHATDB_MODEL, else SmolLM2-135M-Instruct)")
    parser.add_argument("--ctx", type=context_size, metavar="N", default=argparse.SUPPRESS,
                        help="context size in tokens of each sequence")
    parser.add_argument("--parallel", type=positive_int, metavar="N",
                        help="conversations read at once (default: from the hardware)")
    add_kv_type_option(parser)


def run(args) -> int:
    with open_archive(args) as archive:
        ids = [conversation(archive, ref).id for ref in args.conv] or \
              [c.id for c in archive.list_conversations()]
        report = warm_conversations(archive, ids, args)
    if args.json:
        output.print_json(report)
    else:
        output.print_text(summary(report))
    return 0


def warm_conversations(archive, ids: list[int], args) -> dict:
    """Warm `ids`, with a progress bar on a terminal; the report as a dict."""
    from engine.serving import open_warming  # loads llama.cpp

    bar = ProgressBar("warming")
    try:
        with open_warming(archive, getattr(args, "model", None), n_ctx=getattr(args, "ctx", None),
                          parallel=args.parallel, warn=output.warning,
                          kv_type=getattr(args, "kv_type", None)) as warmer:
            report = warmer.warm(ids, bar.update)
    finally:
        bar.close()
    return asdict(report)


def summary(report: dict) -> str:
    return (f"stored the KV of {len(report['warmed'])} conversations "
            f"({report['computed_tokens']:,} tokens computed); "
            f"{len(report['already'])} had it already"
            + (f"; {len(report['too_long'])} longer than the context left out"
               if report["too_long"] else "")
            + (f"; stopped at the KV budget ({format_size(report['budget_bytes'])}): "
               f"{len(report['over_budget'])} older left to read when next used"
               if report["over_budget"] else ""))
