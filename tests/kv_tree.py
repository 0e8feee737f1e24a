"""A check the KV budget's tests share: stored KV matches the tree."""

# A message's rows stored where its parent's are not: they could never be restored.
HOLES = """
SELECT k.message_id FROM kv_segments k JOIN messages m ON m.id = k.message_id
WHERE k.kind = 'rows' AND m.parent_id IS NOT NULL AND NOT EXISTS (
    SELECT 1 FROM kv_segments p WHERE p.message_id = m.parent_id
    AND p.fingerprint = k.fingerprint AND p.kind = 'rows')"""


def assert_rows_are_path_prefixes(archive) -> None:
    """Whatever was dropped, each path keeps rows from its root down, without a hole
    (windows, stored under keys of their own, are not in these tests)."""
    assert archive.conn.execute(HOLES).fetchall() == []
