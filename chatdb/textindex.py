"""The text the full-text index sees for a message, and for a query.

FTS5's unicode61 tokenizer treats a run of CJK characters as one word, so a
substring of Chinese or Japanese text would never match. Each CJK character
is made a word of its own; a substring is then a phrase of adjacent words.
"""

import re

CJK = (
    "\u2e80-\u2fdf\u3040-\u30ff\u3100-\u312f\u31a0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f"
)
CJK_CHAR = re.compile(f"([{CJK}])")
SPACED_AROUND_CJK = re.compile(f" ?([{CJK}]) ?")


def index_text(content: str) -> str:
    """Content as indexed: every CJK character set apart by spaces."""
    return CJK_CHAR.sub(r" \1 ", content) if CJK_CHAR.search(content) else content


def display_text(indexed: str) -> str:
    """Undo index_text() for display (a snippet taken from the index)."""
    return SPACED_AROUND_CJK.sub(r"\1", indexed)
