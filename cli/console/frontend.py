"""What a console command may ask of the user; the terminal and stdin modes implement it."""

from contextlib import nullcontext


class Frontend:
    """The answers when no one can be asked: no, given up, nothing around an answer."""

    def confirm(self, question: str) -> bool:
        return False

    def edit_text(self, text: str) -> "str | None":
        """The user's rewrite of `text` (None: given up)."""
        return None

    def answering(self):
        """A context around the streaming of an answer."""
        return nullcontext()
