"""Options shared by the commands that run the model (ask, chat, doctor).

They belong to the root parser too (`chatdb --model X ask ...`). Their
defaults are SUPPRESS, as for --db, so a subcommand that was not given one
keeps the root's value instead of overwriting it; `fill_defaults` then sets
what neither gave. Sampling values are checked as `/set` checks them.
"""

import argparse

from engine.decode.modes import ASKED, DraftMode
from engine.kv.kv_type import KV_TYPES

from .meaning import add_embed_option
from .options import context_size, positive_int

# name: (parse, check, what a good value is); /set uses the same table.
SETTINGS = {
    "temperature": (float, lambda v: v >= 0, "a number from 0 (0: greedy, repeatable)"),
    "top_p": (float, lambda v: 0 < v <= 1, "a number above 0, at most 1"),
    "top_k": (int, lambda v: v >= 0, "a whole number from 0 (0: off)"),
    "min_p": (float, lambda v: 0 <= v <= 1, "a number from 0 to 1"),
    "repeat_penalty": (float, lambda v: v > 0, "a number above 0 (1: off)"),
    "seed": (int, lambda v: v >= 0, "a whole number from 0, or none"),
    "max_tokens": (int, lambda v: v >= 1, "a whole number from 1"),
}

DEFAULTS = {"model": None, "system": None, "max_tokens": None, "temperature": None,
            "top_k": None, "top_p": None, "min_p": None, "repeat_penalty": None, "seed": None,
            "ctx": None, "draft": DraftMode.AUTO, "draft_model": None, "threads": None,
            "no_kv": False, "embed_model": None, "kv_type": None}


def setting_value(name: str, text: str):
    """The value of setting `name` written as `text`; ValueError saying what is allowed."""
    parse, check, good = SETTINGS[name]
    try:
        value = parse(text)
    except ValueError:
        value = None
    if value is None or not check(value):
        raise ValueError(f"{name} must be {good}, not {text!r}")
    return value


def _setting(name: str):
    """An argparse type for one sampling setting."""
    def convert(text: str):
        try:
            return setting_value(name, text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = name
    return convert


def add_model_options(parser) -> None:
    quiet = argparse.SUPPRESS
    parser.add_argument("--model", metavar="PATH", default=quiet,
                        help="a GGUF model file (default: $CHATDB_MODEL, else SmolLM2-135M-Instruct)")
    parser.add_argument("--system", metavar="TEXT", default=quiet,
                        help="system prompt of a new conversation")
    parser.add_argument("--max-tokens", type=positive_int, metavar="N", default=quiet,
                        help="longest answer")
    parser.add_argument("--temperature", type=_setting("temperature"), metavar="T", default=quiet,
                        help="0 for greedy decoding")
    parser.add_argument("--top-k", type=_setting("top_k"), metavar="K", default=quiet)
    parser.add_argument("--top-p", type=_setting("top_p"), metavar="P", default=quiet)
    parser.add_argument("--min-p", type=_setting("min_p"), metavar="P", default=quiet)
    parser.add_argument("--repeat-penalty", type=_setting("repeat_penalty"), metavar="R",
                        default=quiet)
    parser.add_argument("--seed", type=_setting("seed"), metavar="S", default=quiet,
                        help="sampling seed (repeatable answers)")
    parser.add_argument("--ctx", type=context_size, metavar="N", default=quiet,
                        help="context size in tokens")
    add_draft_options(parser)
    parser.add_argument("--threads", type=positive_int, metavar="N", default=quiet,
                        help="CPU threads for decoding and prefill (default: $CHATDB_THREADS, "
                             "else chosen from the cores free, turn by turn)")
    add_kv_type_option(parser)
    parser.add_argument("--no-kv", action="store_true", default=quiet,
                        help="neither restore nor store KV state in the archive (re-read history)")
    add_embed_option(parser, quiet=True)


def add_draft_options(parser, where: str = "") -> None:
    """--draft and --draft-model; `where` says where guesses are verified, if anywhere but
    the one sequence."""
    parser.add_argument("--draft", choices=ASKED, default=argparse.SUPPRESS,
                        help=f"speculative decoding{where}: guesses from answers written before "
                             "(archive), from the conversation's own text (lookup), from "
                             "--draft-model, or all of them in that order (auto, the default)")
    parser.add_argument("--draft-model", metavar="PATH", default=argparse.SUPPRESS,
                        help="a smaller GGUF model sharing the main model's vocabulary")


def add_kv_type_option(parser) -> None:
    parser.add_argument("--kv-type", choices=list(KV_TYPES), default=argparse.SUPPRESS,
                        help="how the KV cache holds its values: f16, or q8_0 (about half the "
                             "bytes, with flash attention; see `chatdb kv type`). Default: "
                             "$CHATDB_KV_TYPE, else the archive's (f16 unless set)")


def fill_defaults(args: argparse.Namespace) -> None:
    """Set the model options that neither the root nor the subcommand was given."""
    for name, value in DEFAULTS.items():
        if not hasattr(args, name):
            setattr(args, name, value)


def sampling_from(args):
    """SamplingSettings from the options (imports the engine: only when it runs)."""
    from engine.llama.sampling import SamplingSettings

    return SamplingSettings().with_(
        temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p,
        repeat_penalty=args.repeat_penalty, seed=args.seed, max_tokens=args.max_tokens)
