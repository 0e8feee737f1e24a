"""A search query as FTS5 runs it: its syntax checked, repeats removed, common phrases unscored.

A query in FTS5 syntax works as such ("a phrase", prefix*, OR, NOT,
NEAR(...)); text that is not valid syntax is searched as plain words.
FTS5's time grows with the square of a query's phrases: a phrase said twice
is searched once, and a query of more than MAX_TERMS words (a pasted page)
is refused. To learn a phrase's idf, FTS5 counts every message that
contains it, in every search; in an archive of EXACT_BELOW messages or more,
a common phrase still selects messages but is left out of the score.
"""

import sqlite3

from ..errors import SearchError
from ..queries import LAST_MESSAGE_ID
from ..storage import dbapi
from .textindex import QUERY_TOKEN, and_phrases, plain_query, query_text

COMMON_SAMPLE = 1000  # newest rowids in which a phrase's share is measured
EXACT_BELOW = 20_000  # archives this small are ranked with every phrase
MAX_COUNTED = 100_000  # a phrase in more messages is left out of the score (~3 ms to count)
MAX_TERMS = 256  # words and operators in one query (a pasted page is not a query)


# Parsing is what a bad query fails at; rowid 0 is never a message.
VALIDATE = "SELECT 1 FROM messages_fts WHERE messages_fts MATCH ? AND rowid = 0"
PHRASE_COUNT_FROM = "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ? AND rowid > ?"


def match_expression(conn: sqlite3.Connection, query: str) -> "str | None":
    """The FTS5 expression to run: the query as syntax if valid, else its words."""
    if not query or not query.strip():
        return None
    expression = _without_repeats(query_text(query))
    if _terms(expression) <= MAX_TERMS:
        try:
            conn.execute(VALIDATE, (expression,)).fetchall()
            return expression
        except dbapi.OperationalError:  # fts5: syntax error, no such column, ...
            pass
    expression = plain_query(query)
    expression = expression and _without_repeats(expression)
    if expression is not None and (terms := _terms(expression)) > MAX_TERMS:
        raise SearchError(f"the query has {terms:,} different words; at most {MAX_TERMS} "
                          "are searched at once")
    return expression


def _terms(expression: str) -> int:
    return sum(1 for token in QUERY_TOKEN.findall(expression) if not token.isspace())


def _without_repeats(expression: str) -> str:
    """A plain AND of phrases with each phrase once: FTS5's time grows with the
    square of the phrases, and a repeated one selects nothing more."""
    phrases = and_phrases(expression)
    return " ".join(dict.fromkeys(phrases)) if phrases else expression


def scoring_expression(conn: sqlite3.Connection, match: str) -> "str | None":
    """`match` without its common phrases, which FTS5 would count in full.

    A phrase is common in more than half the newest COMMON_SAMPLE messages
    (its idf is floored anyway), or when it is in more than MAX_COUNTED
    messages by that share. None when every phrase is common: all scores
    are then 0 and recency alone orders the hits. Only a plain AND of
    phrases can lose one; small archives keep every phrase.
    """
    phrases = and_phrases(match)
    newest = conn.execute(LAST_MESSAGE_ID).fetchone()[0]
    if not phrases or newest < EXACT_BELOW:
        return match
    since_id = newest - COMMON_SAMPLE
    most = min(COMMON_SAMPLE / 2, COMMON_SAMPLE * MAX_COUNTED / newest)
    kept = [phrase for phrase in phrases
            if conn.execute(PHRASE_COUNT_FROM, (phrase, since_id)).fetchone()[0] <= most]
    return " ".join(kept) if kept else None
