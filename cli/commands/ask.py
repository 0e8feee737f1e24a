"""`chatdb ask`: answer one message, streaming it, and keep both in the archive."""

import sys

from .. import output
from ..interrupt import stop_on_sigint
from .model_options import add_model_options, sampling_from
from .options import add_command, open_archive

TITLE_WIDTH = 60

DESCRIPTION = """\
Answer one message and record both messages in the archive.

Without -c, --conv or --fork-from a new conversation starts. TEXT `-` reads
the message from stdin. Ctrl-C stops the answer and keeps what was written
(marked interrupted).

JSON: {conversation_id, user_message_id, message_id, text, status, finish,
usage: {prompt_tokens, completion_tokens},
kv: {restored_tokens, computed_tokens, restore_ms, source, ahead},
timings: {ttft_ms, decode_tokens_per_s, total_ms},
speculative: {mode, drafted, accepted, acceptance_rate, target_forwards, draft_length},
warnings}"""


def register(subparsers) -> None:
    parser = add_command(subparsers, "ask", run, help="answer one message (scriptable)",
                         description=DESCRIPTION)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("-c", "--continue", dest="continue_last", action="store_true",
                       help="continue the most recently used conversation")
    which.add_argument("--conv", type=int, metavar="ID", help="continue conversation ID")
    which.add_argument("--fork-from", type=int, metavar="MESSAGE_ID",
                       help="start a new conversation from an earlier message")
    add_model_options(parser)
    parser.add_argument("text", metavar="TEXT", help="the message, or - to read stdin")


def run(args) -> int:
    from engine.chat import Engine  # loads llama.cpp: only for commands that need it

    if args.system and (args.continue_last or args.conv):
        output.error("--system starts a new conversation; it cannot be given with -c or --conv")
        return 2
    text = sys.stdin.read() if args.text == "-" else args.text
    if not text.strip():
        output.error("the message is empty")
        return 2
    with open_archive(args) as archive:
        conv_id = _conversation(archive, args, text)
        engine = Engine.open(archive, args.model, n_ctx=args.ctx, use_kv=not args.no_kv,
                             sampling=sampling_from(args), warn=output.warning,
                             draft=args.draft, draft_model=args.draft_model,
                             resume=archive.conversation(conv_id).head_id, threads=args.threads)
        try:
            stream = None if args.json else _stream
            with stop_on_sigint() as stopped:
                result = engine.reply(conv_id, text, on_text=stream, cancelled=stopped)
        finally:
            engine.close()
    if args.json:
        output.print_json(as_json(result))
    else:
        sys.stdout.write("\n")
    return 130 if result.status == "interrupted" else 0


def _stream(text: str) -> None:
    sys.stdout.write(output.safe(text))
    sys.stdout.flush()


def _conversation(archive, args, text: str) -> int:
    if args.conv is not None:
        return archive.conversation(args.conv).id
    if args.continue_last:
        latest = archive.latest_conversation()
        if latest is not None:
            return latest.id
    if args.fork_from is not None:
        return archive.fork(args.fork_from).id
    return archive.create_conversation(title_of(text), system_prompt=args.system).id


def title_of(text: str) -> str:
    """A new conversation's title: the start of its first message."""
    return output.shorten(text, TITLE_WIDTH)


def as_json(result) -> dict:
    return {
        "conversation_id": result.conversation_id,
        "user_message_id": result.user_message_id,
        "message_id": result.message_id,
        "text": result.text,
        "status": result.status,
        "finish": result.finish,
        "usage": {"prompt_tokens": result.prompt_tokens,
                  "completion_tokens": result.completion_tokens},
        "kv": {"restored_tokens": result.restored_tokens, "computed_tokens": result.computed_tokens,
               "restore_ms": result.restore_ms, "source": result.kv_source,
               "ahead": result.restored_ahead},
        "timings": {"ttft_ms": result.ttft_ms, "decode_tokens_per_s": result.decode_tokens_per_s,
                    "total_ms": result.total_ms},
        "speculative": result.speculative,
        "left_out_messages": result.left_out_messages,
        "warnings": result.warnings,
    }
