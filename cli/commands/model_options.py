"""Options shared by the commands that run the model (ask, chat)."""

import argparse

from .options import positive_int


def add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", metavar="PATH",
                        help="a GGUF model file (default: $CHATDB_MODEL, else SmolLM2-135M-Instruct)")
    parser.add_argument("--system", metavar="TEXT", help="system prompt of a new conversation")
    parser.add_argument("--max-tokens", type=positive_int, metavar="N", help="longest answer")
    parser.add_argument("--temperature", type=float, metavar="T", help="0 for greedy decoding")
    parser.add_argument("--top-k", type=int, metavar="K")
    parser.add_argument("--top-p", type=float, metavar="P")
    parser.add_argument("--min-p", type=float, metavar="P")
    parser.add_argument("--repeat-penalty", type=float, metavar="R")
    parser.add_argument("--seed", type=int, metavar="S", help="sampling seed (repeatable answers)")
    parser.add_argument("--ctx", type=positive_int, metavar="N", help="context size in tokens")
    parser.add_argument("--draft", choices=("auto", "lookup", "model", "off"), default="auto",
                        help="speculative decoding: guesses from the conversation's own text "
                             "(lookup), from --draft-model, or both (auto, the default)")
    parser.add_argument("--draft-model", metavar="PATH",
                        help="a smaller GGUF model sharing the main model's vocabulary")
    parser.add_argument("--threads", type=positive_int, metavar="N",
                        help="CPU threads for decoding and prefill (default: $CHATDB_THREADS, "
                             "else chosen from the cores free, turn by turn)")
    parser.add_argument("--no-kv", action="store_true",
                        help="neither restore nor store KV state in the archive (re-read history)")


def sampling_from(args):
    """SamplingSettings from the options (imports the engine: only when it runs)."""
    from engine.sampling import SamplingSettings

    return SamplingSettings().with_(
        temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p,
        repeat_penalty=args.repeat_penalty, seed=args.seed, max_tokens=args.max_tokens)
