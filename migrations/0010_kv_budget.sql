-- A budget for the KV state the archive keeps, and what choosing what to drop needs.

-- Settings of the archive itself, which every process using it obeys (the KV
-- budget: 'kv_budget', in bytes or 'unlimited'; absent, the default).
CREATE TABLE settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

-- The bytes of KV stored, segments and shared runs together, kept true by
-- the triggers below: a write checks the budget without reading the KV
-- table (whose rows hold kilobytes each even before their blobs).
CREATE TABLE kv_totals (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    bytes INTEGER NOT NULL,
    blobs INTEGER NOT NULL
);
INSERT INTO kv_totals (id, bytes, blobs)
SELECT 1, coalesce(sum(length(data)), 0), count(*)
FROM (SELECT data FROM kv_segments UNION ALL SELECT data FROM kv_shared_rows);

CREATE TRIGGER kv_totals_segment_added AFTER INSERT ON kv_segments BEGIN
    UPDATE kv_totals SET bytes = bytes + length(new.data), blobs = blobs + 1 WHERE id = 1;
END;
CREATE TRIGGER kv_totals_segment_removed AFTER DELETE ON kv_segments BEGIN
    UPDATE kv_totals SET bytes = bytes - length(old.data), blobs = blobs - 1 WHERE id = 1;
END;
CREATE TRIGGER kv_totals_segment_rewritten AFTER UPDATE OF data ON kv_segments BEGIN
    UPDATE kv_totals SET bytes = bytes + length(new.data) - length(old.data) WHERE id = 1;
END;
CREATE TRIGGER kv_totals_shared_added AFTER INSERT ON kv_shared_rows BEGIN
    UPDATE kv_totals SET bytes = bytes + length(new.data), blobs = blobs + 1 WHERE id = 1;
END;
CREATE TRIGGER kv_totals_shared_removed AFTER DELETE ON kv_shared_rows BEGIN
    UPDATE kv_totals SET bytes = bytes - length(old.data), blobs = blobs - 1 WHERE id = 1;
END;

-- When KV was last used (restored, or written by a turn): one row per point a
-- used path ended at (its last message), under the key its KV is stored under
-- (an engine fingerprint, or a window's key). A use removes the rows of the
-- points above it on its path: the path's own row says it for them.
CREATE TABLE kv_uses (
    message_id  INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    fingerprint TEXT NOT NULL,
    used_at     TEXT NOT NULL,
    PRIMARY KEY (message_id, fingerprint)
) WITHOUT ROWID;

-- The latest turns that reopened a conversation (its KV not already in the
-- process's memory): how many of the tokens it had before the turn came from
-- the archive. What `chatdb kv` reports as how often the archive served them.
CREATE TABLE kv_reopenings (
    id              INTEGER PRIMARY KEY,
    at              TEXT NOT NULL,
    restored_tokens INTEGER NOT NULL,
    reusable_tokens INTEGER NOT NULL
);
