"""Snippets of long messages, read from a window around a match, not from the whole text.

FTS5's snippet() reads every match of the phrases in the message and scores
each against the others: a 2 MB log naming the searched word on every line
took 7 s, 20 MB minutes. For a message longer than WHOLE_TEXT_BYTES the
text is read in steps (SQLite's incremental blob reads) until one of the
query's words shows, and snippet() runs on WINDOW_CHARS around it, in a
scratch in-memory index tokenized as messages_fts is: the same words
marked, at a cost that no longer grows with the message. A window the
whole query does not match (the word was part of another, the query wants
a word far away) is passed over; after MAX_WINDOWS the message's start is
shown unmarked.
"""

import sqlite3

from .textindex import BAREWORD, OPERATORS, QUERY_TOKEN, index_text

WHOLE_TEXT_BYTES = 64 * 1024
WINDOW_CHARS = 4096
SCAN_BYTES = 1 << 20
MAX_WINDOWS = 4
START_WORDS = 16

# messages_fts's tokenizer (migrations/0001_initial.sql), so a window is read as the index reads it
SCRATCH_INDEX = ("CREATE VIRTUAL TABLE window USING fts5(body, "
                 "tokenize = 'unicode61 remove_diacritics 2')")
WINDOW_SNIPPET = ("SELECT snippet(window, 0, :start, :end, :ellipsis, :tokens) FROM window "
                  "WHERE window MATCH :match")


def is_long(conn: sqlite3.Connection, message_id: int) -> bool:
    with conn.blobopen("messages", "content", message_id, readonly=True) as blob:
        return len(blob) > WHOLE_TEXT_BYTES


class WindowSnippets:
    """Snippets of long messages for one query; one scratch index for all of them."""

    def __init__(self, match: str, marks: dict):
        self.match, self.marks = match, marks
        self.words = query_words(match)
        self.scratch = sqlite3.connect(":memory:")
        self.scratch.execute(SCRATCH_INDEX)

    def close(self) -> None:
        self.scratch.close()

    def snippet(self, conn: sqlite3.Connection, message_id: int) -> str:
        with conn.blobopen("messages", "content", message_id, readonly=True) as blob:
            size = len(blob)
            tried = 0
            for start, text in self._windows(blob):
                found = self._marked(index_text(text))
                if found is not None:
                    return self._ellipses(found, start > 0, start + len(text.encode()) < size)
                tried += 1
                if tried == MAX_WINDOWS:
                    break
            blob.seek(0)
            head = blob.read(WINDOW_CHARS).decode("utf-8", "ignore").split()
        return " ".join(head[:START_WORDS]) + (self.marks["ellipsis"] if len(head) > START_WORDS else "")

    def _windows(self, blob):
        """(byte offset, text) of each stretch around a place one of the words shows."""
        offset, size, half = 0, len(blob), WINDOW_CHARS // 2
        while offset < size and self.words:
            blob.seek(offset)
            chunk = blob.read(SCAN_BYTES + WINDOW_CHARS * 4).decode("utf-8", "ignore")
            lowered, at = chunk.lower(), 0
            while True:
                places = [p for p in (lowered.find(word, at) for word in self.words) if p >= 0]
                if not places:
                    break
                place = min(places)
                begin = max(0, place - half)
                yield offset + len(chunk[:begin].encode()), chunk[begin:place + half]
                at = place + half
            offset += SCAN_BYTES

    def _marked(self, text: str) -> "str | None":
        self.scratch.execute("DELETE FROM window")
        self.scratch.execute("INSERT INTO window (body) VALUES (?)", (text,))
        try:
            row = self.scratch.execute(WINDOW_SNIPPET, {"match": self.match, **self.marks}).fetchone()
        except sqlite3.OperationalError:
            return None
        return row[0] if row else None

    def _ellipses(self, snippet: str, cut_before: bool, cut_after: bool) -> str:
        ellipsis = self.marks["ellipsis"]
        if cut_before and not snippet.startswith(ellipsis):
            snippet = ellipsis + snippet
        if cut_after and not snippet.endswith(ellipsis):
            snippet += ellipsis
        return snippet


def query_words(match: str) -> list[str]:
    """The words of an FTS5 expression, lower-cased (prefixes without their *)."""
    words = []
    for token in QUERY_TOKEN.findall(match):
        if token.startswith('"'):
            words += BAREWORD.findall(token.strip('"').replace('""', '"'))
        elif BAREWORD.fullmatch(token) and token not in OPERATORS and token != "AND":
            words.append(token)
    return list(dict.fromkeys(word.lower() for word in words if word.strip("*")))
