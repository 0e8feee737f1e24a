"""Remembered fingerprints of files (models), keyed by path, size and mtime."""

import sqlite3

GET = "SELECT fingerprint FROM file_fingerprints WHERE path = ? AND size = ? AND mtime_ns = ?"
PUT = """
INSERT OR REPLACE INTO file_fingerprints (path, size, mtime_ns, fingerprint) VALUES (?, ?, ?, ?)"""


class FingerprintCache:
    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def get(self, path: str, size: int, mtime_ns: int) -> "str | None":
        row = self.conn.execute(GET, (path, size, mtime_ns)).fetchone()
        return row[0] if row else None

    def put(self, path: str, size: int, mtime_ns: int, fingerprint: str) -> None:
        self.conn.execute(PUT, (path, size, mtime_ns, fingerprint))
