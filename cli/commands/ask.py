"""`chatdb ask`: answer one message, streaming it, and keep both in the archive."""

import sys

from engine.errors import Cancelled

from .. import output, refs
from ..interrupt import quit_on_signals, stop_on_sigint
from ..meaning import indexing
from ..model_options import add_model_options, sampling_from
from ..options import add_command, open_archive
from ..text_input import read_stdin


DESCRIPTION = """\
Answer one message and record both messages in the archive.

Without -c, --conv or --fork-from a new conversation starts. TEXT `-` reads
the message from stdin. Ctrl-C stops the answer and keeps what was written
(marked interrupted); SIGTERM and SIGHUP do too, and exit 143 and 129.

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
    which.add_argument("--conv", metavar="CONV",
                       help="continue conversation CONV (its number from `chatdb list`, or its uid)")
    which.add_argument("--fork-from", metavar="MESSAGE",
                       help="start a new conversation from an earlier message (number or uid)")
    add_model_options(parser)
    parser.add_argument("text", metavar="TEXT", help="the message, or - to read stdin")


def run(args) -> int:
    if args.system and (args.continue_last or args.conv):
        output.error("--system starts a new conversation; it cannot be given with -c or --conv")
        return 2
    text = read_stdin() if args.text == "-" else args.text
    if not text.strip():
        output.error("the message is empty")
        return 2
    with open_archive(args, create=True) as archive, quit_on_signals(), indexing(archive, args):
        question = Question.write(archive, args, text)
        try:
            result, quit_status = _answer(archive, args, question)
        except Exception:  # a failed start (no model, too long): leave nothing behind
            question.undo()
            raise
    if result is None:  # stopped before the answer began: the question stays, unanswered
        output.warning(f"stopped before the answer began; the question is kept "
                       f"(message {question.message.id})")
        return quit_status or 130
    if args.json:
        output.print_json(as_json(result))
    else:
        sys.stdout.write("\n")
    return quit_status or (130 if result.status == "interrupted" else 0)


def _answer(archive, args, question: "Question"):
    """(the turn's result, or None if it was stopped before the answer began; the exit
    status a SIGTERM or SIGHUP asks for, or None)."""
    from engine.chat import Engine  # loads llama.cpp: only for commands that need it

    engine = Engine.open(archive, args.model, n_ctx=args.ctx, use_kv=not args.no_kv,
                         sampling=sampling_from(args), warn=output.warning,
                         draft=args.draft, draft_model=args.draft_model,
                         resume=question.message.id, threads=args.threads, kv_type=args.kv_type)
    try:
        stream = None if args.json else _stream
        with stop_on_sigint() as stopped:
            try:
                result = engine.answer(question.conv_id, question.message.id, on_text=stream,
                                       cancelled=stopped)
            except Cancelled:
                result = None
    finally:
        engine.close()  # the answer's KV is stored, even on SIGTERM
    return result, stopped.quit_status


def _stream(text: str) -> None:
    sys.stdout.write(output.safe(text))
    sys.stdout.flush()


class Question:
    """The question, written before the model loads (a kill meanwhile keeps it)."""

    def __init__(self, archive, conv_id: int, message, new_conversation: bool):
        self.archive, self.conv_id, self.message = archive, conv_id, message
        self.new_conversation = new_conversation

    @classmethod
    def write(cls, archive, args, text: str) -> "Question":
        conv_id, new = _conversation(archive, args, text)
        try:
            message = archive.add_question(conv_id, text)
        except BaseException:
            if new:
                archive.delete_conversation(conv_id)
            raise
        return cls(archive, conv_id, message, new)

    def undo(self) -> None:
        """Take the question back, and the conversation if this command made it
        (not once it has an answer)."""
        if self.archive.children(self.message.id):
            return
        if self.new_conversation:
            self.archive.delete_conversation(self.conv_id)
        else:
            self.archive.retract(self.message.id)


def _conversation(archive, args, text: str) -> "tuple[int, bool]":
    """(conversation id, whether it is new)."""
    if args.conv is not None:
        return refs.conversation(archive, args.conv).id, False
    if args.continue_last:
        latest = archive.latest_conversation()
        if latest is not None:
            return latest.id, False
    if args.fork_from is not None:
        return archive.fork(refs.message(archive, args.fork_from).id).id, True
    return archive.create_conversation(output.title_of(text), system_prompt=args.system).id, True


def window_json(result) -> dict:
    """The part of the path the model saw: its first message after the system prompt
    (an id, as `chatdb show` gives them) and how many before it were left out."""
    return {"first_message_id": result.window_first, "left_out_messages": result.left_out_messages}


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
        "window": window_json(result),
        "warnings": result.warnings,
    }
