"""What a console command may ask of the user; the terminal and stdin modes implement it."""


class Frontend:
    """The answers when no one can be asked: no, and given up."""

    def confirm(self, question: str) -> bool:
        return False

    def edit_text(self, text: str) -> "str | None":
        """The user's rewrite of `text` (None: given up)."""
        return None
