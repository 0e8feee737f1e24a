"""The text the full-text index sees for a message, and for a query.

FTS5's unicode61 tokenizer treats a run of CJK characters as one word, so a
substring of Chinese or Japanese text would never match. Each CJK character
is made a word of its own; a substring is then a phrase of adjacent words,
and a query gets the same treatment.
"""

import re

CJK = (
    "\u2e80-\u2fdf\u3040-\u30ff\u3100-\u312f\u31a0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f"
)
CJK_CHAR = re.compile(f"([{CJK}])")

# Snippets mark matches with these; the indexed copy of a message never
# contains them, so a mark in a snippet is always one that FTS5 put there.
MARK_START = "\x02"
MARK_END = "\x03"
NO_MARKS = str.maketrans(MARK_START + MARK_END, "  ")
# A space index_text() added next to a CJK character, marks in between or not.
SPACED_AROUND_CJK = re.compile(f" ?([{MARK_START}{MARK_END}]*[{CJK}][{MARK_START}{MARK_END}]*) ?")

# FTS5 query syntax, token by token: a "string" ("" inside is a quote; an
# unterminated one runs to the end), a bareword (ASCII letters, digits, _,
# \x1a, and every non-ASCII character but spaces), a run of spaces, or one
# other character.
BAREWORD = re.compile("(?:(?!\\s)[0-9A-Za-z_\x1a\x80-\U0010ffff])+")
QUERY_TOKEN = re.compile(f'"(?:[^"]|"")*"?|{BAREWORD.pattern}|\\s+|.', re.S)
OPERATORS = ("OR", "NOT", "NEAR")
WORD_CHAR = re.compile(r"[^\W_]")


def index_text(content: str) -> str:
    """Content as indexed: every CJK character set apart by spaces."""
    if MARK_START in content or MARK_END in content:
        content = content.translate(NO_MARKS)
    return CJK_CHAR.sub(r" \1 ", content) if CJK_CHAR.search(content) else content


def display_text(indexed: str) -> str:
    """Undo index_text() for display (a snippet taken from the index)."""
    return SPACED_AROUND_CJK.sub(r"\1", indexed)


def query_text(query: str) -> str:
    """An FTS5 query as typed, with its CJK text split as index_text() splits it.

    CJK inside a bareword becomes a quoted phrase of its characters, so that
    東京 matches the adjacent characters 東 京 and not each one anywhere.
    Any space separates words (FTS5 alone would take the ideographic space
    of 東京\u3000大阪 for part of one word).
    """
    return QUERY_TOKEN.sub(_query_token, query)


def _query_token(match: re.Match) -> str:
    token = match.group()
    if token.isspace():
        return " "
    if not CJK_CHAR.search(token):
        return token
    if token.startswith('"'):
        return index_text(token)
    return f'"{index_text(token)}"'


def plain_query(query: str) -> "str | None":
    """The query read as plain words, for text that is not valid FTS5 syntax.

    Each run of non-space text becomes a quoted phrase (C++ -> "C++" -> c,
    foo-bar -> the phrase foo bar); runs without a letter or digit are
    dropped. None when nothing searchable is left.
    """
    phrases = [chunk for chunk in query.split() if WORD_CHAR.search(chunk)]
    if not phrases:
        return None
    return " ".join('"' + index_text(chunk).replace('"', '""') + '"' for chunk in phrases)


def and_phrases(query: str) -> "list[str] | None":
    """The phrases of a query that only ANDs phrases together, else None.

    '"new york" pizza*' -> ['"new york"', 'pizza*']; anything with OR, NOT,
    NEAR, parentheses, a column filter or ^ gives None.
    """
    phrases: list[str] = []
    for token in QUERY_TOKEN.findall(query):
        if token.isspace() or token == "AND":
            continue
        if token == "*" and phrases and not phrases[-1].endswith("*"):
            phrases[-1] += "*"
        elif token.startswith('"') or (BAREWORD.fullmatch(token) and token not in OPERATORS):
            phrases.append(token)
        else:
            return None
    return phrases
