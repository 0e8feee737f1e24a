"""Stored cost models of forward passes, one per engine configuration, machine and thread count.

The archive keeps them as opaque JSON for the engine, which fits and reads them.
"""

import sqlite3

from .clock import now

GET = "SELECT model, turns FROM cost_models WHERE engine = ? AND machine = ? AND threads = ?"
PUT = """
INSERT INTO cost_models (engine, machine, threads, model, turns, updated_at)
VALUES (:engine, :machine, :threads, :model, :turns, :now)
ON CONFLICT (engine, machine, threads) DO UPDATE
SET model = excluded.model, turns = excluded.turns, updated_at = excluded.updated_at"""


class CostStore:
    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def get(self, engine: str, machine: str, threads: int) -> "tuple[str, int] | None":
        """(the model's JSON, turns it was refined from), or None if never measured."""
        row = self.conn.execute(GET, (engine, machine, threads)).fetchone()
        return (row[0], row[1]) if row else None

    def put(self, engine: str, machine: str, threads: int, model: str, turns: int) -> None:
        self.conn.execute(PUT, {"engine": engine, "machine": machine, "threads": threads,
                                "model": model, "turns": turns, "now": now()})
