"""The console at a terminal: a prompt_toolkit prompt, then the answer streamed below it.

The prompt owns the terminal only while the user types; an answer is
generated after prompt() returns, so Ctrl-C there is a plain SIGINT that
cli.interrupt turns into "stop this answer, keep what was written". Between
prompts (an answer, a slow command, the moment one prompt ends and the next
begins) keys are neither echoed nor cooked, but wait as typed for the next
prompt (no_echo): in the terminal's normal mode a Ctrl-D typed then is taken
by the terminal as an end of input, and reaches the next prompt as a NUL
byte, lost.
"""

from contextlib import contextmanager

try:
    import termios
except ImportError:  # Windows: prompt_toolkit drives its console itself
    termios = None

from prompt_toolkit import PromptSession
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.output import ColorDepth

from . import dispatch
from .completion import ConsoleCompleter
from .history_file import ensure_private, history_path
from .keys import bindings
from .frontend import Frontend
from .sigint import ConsoleInterrupts


class TerminalFrontend(Frontend):
    def __init__(self, prompt: PromptSession, question: PromptSession,
                 interrupts: ConsoleInterrupts):
        self.prompt, self.question, self.interrupts = prompt, question, interrupts

    def confirm(self, question: str) -> bool:
        try:
            return self.interrupts.prompt(self.question, question).strip().casefold() in ("y", "yes")
        except (KeyboardInterrupt, EOFError):
            return False

    def edit_text(self, text: str) -> "str | None":
        try:
            return self.interrupts.prompt(self.prompt, _message("edit"), default=text)
        except (KeyboardInterrupt, EOFError):
            return None


@contextmanager
def no_echo(keyboard):
    """Keys are neither echoed into what is shown nor cooked: they wait, as typed (Enter,
    Ctrl-D included), for the next prompt. Ctrl-C still sends SIGINT."""
    if termios is None:
        yield
        return
    try:
        fd = keyboard.fileno()
        saved = termios.tcgetattr(fd)
    except (OSError, ValueError, termios.error):  # not a terminal (pipe input in tests)
        yield
        return
    quiet = [*saved[:6], list(saved[6])]
    quiet[0] &= ~termios.ICRNL
    quiet[3] &= ~(termios.ECHO | termios.ECHONL | termios.ICANON)
    quiet[6][termios.VMIN], quiet[6][termios.VTIME] = 1, 0
    termios.tcsetattr(fd, termios.TCSANOW, quiet)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, saved)


def make_prompts(session, input=None, output=None, history=None):
    """(the main prompt, the one for questions); input/output are for tests."""
    depth = None if session.render.color else ColorDepth.DEPTH_1_BIT
    common = dict(input=input, output=output, color_depth=depth)
    prompt = PromptSession(
        history=history or FileHistory(str(ensure_private(history_path(),
                                                          session.render.warning))),
        completer=ConsoleCompleter(session), complete_while_typing=False,
        key_bindings=bindings(), multiline=True, enable_open_in_editor=True,
        prompt_continuation=lambda width, line, wrap: "." * (width - 1) + " ", **common)
    question = PromptSession(history=InMemoryHistory(), **common)
    return prompt, question


def run(session, input=None, output=None, history=None) -> int:
    prompt, question = make_prompts(session, input, output, history)
    interrupts = ConsoleInterrupts()
    session.use_frontend(TerminalFrontend(prompt, question, interrupts))
    with interrupts.installed(), no_echo(prompt.input):   # each prompt sets its own mode
        while not session.quitting:
            try:
                text = interrupts.prompt(prompt, _message(_where(session)))
            except KeyboardInterrupt:  # Ctrl-C at the prompt: drop the line
                continue
            except EOFError:           # Ctrl-D
                break
            try:
                with interrupts.command():
                    dispatch.handle(session, text)
            except KeyboardInterrupt:  # Ctrl-C in a slow command (an answer handles its own)
                session.render.warning("interrupted")
    return 0


def _where(session) -> str:
    return f"#{session.conv_id}" if session.conv_id is not None else "new"


def _message(where: str) -> FormattedText:
    return FormattedText([("ansibrightblack", f"{where} "), ("ansigreen bold", "› ")])
