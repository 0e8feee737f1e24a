"""The content hash of a message: its role and text, as one signed 64-bit integer.

Registered as the SQL function chatdb_content_hash(role, content) on every
connection, so the schema's triggers fill messages.content_hash whoever
writes the message. A match found through it is checked against the text
itself (message_match.py), so a collision never joins two different messages.
"""

import hashlib
import sqlite3

SQL_NAME = "chatdb_content_hash"


def content_hash(role: str, content: str) -> int:
    digest = hashlib.sha256(f"{role}\0{content}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "little", signed=True)


def _sql_hash(role, content):
    if role is None or content is None:
        return None
    return content_hash(str(role), str(content))


def register(conn: sqlite3.Connection) -> None:
    conn.create_function(SQL_NAME, 2, _sql_hash, deterministic=True)
