"""Token arrays: the exact int32 tokens a message adds to the prompt."""

import sqlite3

import numpy as np

from .queries import WALK_UP

TOKEN_DTYPE = np.dtype("<i4")

PUT = """
INSERT OR REPLACE INTO message_tokens (message_id, tokenizer_id, n_tokens, tokens)
VALUES (?, ?, ?, ?)"""
GET = "SELECT tokens FROM message_tokens WHERE message_id = ? AND tokenizer_id = ?"
ALONG_PATH = WALK_UP + """
SELECT up.id, t.tokens FROM up
LEFT JOIN message_tokens t ON t.message_id = up.id AND t.tokenizer_id = :tokenizer
ORDER BY up.depth"""


def pack(tokens) -> bytes:
    """int32 little-endian bytes; ValueError for anything that is not int32 ids
    (a cast alone would wrap 2**32 to 0, or cut 1.5 to 1, without a word)."""
    array = np.asarray(tokens)
    if array.size == 0:
        return b""
    if array.dtype.kind not in "iu":
        raise ValueError(f"token ids must be integers, not {array.dtype}")
    if not np.can_cast(array.dtype, TOKEN_DTYPE):
        info = np.iinfo(TOKEN_DTYPE)
        if array.min() < info.min or array.max() > info.max:
            raise ValueError("token ids must fit in int32")
    return array.astype(TOKEN_DTYPE, copy=False).tobytes()


def unpack(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=TOKEN_DTYPE)


class TokenStore:
    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def put(self, message_id: int, tokenizer_id: str, tokens) -> None:
        blob = pack(tokens)
        self.conn.execute(PUT, (message_id, tokenizer_id, len(blob) // TOKEN_DTYPE.itemsize, blob))

    def get(self, message_id: int, tokenizer_id: str) -> "np.ndarray | None":
        row = self.conn.execute(GET, (message_id, tokenizer_id)).fetchone()
        return unpack(row[0]) if row else None

    def along_path(self, message_id: int, tokenizer_id: str) -> list[tuple[int, "np.ndarray | None"]]:
        """(message id, tokens or None) from the root down to `message_id`."""
        rows = self.conn.execute(ALONG_PATH, {"message_id": message_id, "tokenizer": tokenizer_id})
        return [(mid, unpack(blob) if blob is not None else None) for mid, blob in rows]
