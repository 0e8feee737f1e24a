"""The prompt's keys beyond prompt_toolkit's Emacs-style defaults.

Enter sends (or takes the highlighted completion); Alt-Enter, which a
terminal sends as Esc then Enter, starts a new line. Pasted text arrives as
one bracketed paste and keeps its newlines. Defaults kept: Ctrl-R searches
the history, Ctrl-X Ctrl-E opens $EDITOR, Ctrl-C raises KeyboardInterrupt
(the line is dropped), Ctrl-D on an empty line raises EOFError (quit).
"""

from prompt_toolkit.filters import is_searching
from prompt_toolkit.key_binding import KeyBindings


def bindings() -> KeyBindings:
    kb = KeyBindings()

    # Not while Ctrl-R searches: there Enter takes the line found (the default).
    @kb.add("enter", filter=~is_searching)
    def _send(event) -> None:
        buffer = event.current_buffer
        state = buffer.complete_state
        if state is not None and state.current_completion is not None:
            buffer.apply_completion(state.current_completion)
            return
        buffer.validate_and_handle()

    @kb.add("escape", "enter", filter=~is_searching)
    def _newline(event) -> None:
        event.current_buffer.insert_text("\n")

    return kb
