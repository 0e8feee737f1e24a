"""Settings of the archive itself (table `settings`): what every process using it obeys."""

import sqlite3

GET = "SELECT value FROM settings WHERE key = ?"
PUT = "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
DELETE = "DELETE FROM settings WHERE key = ?"


class Settings:
    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def get(self, key: str) -> "str | None":
        row = self.conn.execute(GET, (key,)).fetchone()
        return row[0] if row else None

    def put(self, key: str, value: str) -> None:
        self.conn.execute(PUT, (key, value))

    def delete(self, key: str) -> None:
        self.conn.execute(DELETE, (key,))
