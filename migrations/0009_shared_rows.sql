-- KV rows that sibling messages share. Siblings begin with the same tokens
-- at the same positions after the same parent (a template's turn opening, a
-- question's first words), so the leading rows of their segments are often
-- the same bytes; such a run is stored once here and a segment that begins
-- with it names it (shared_id), holding only the rest of its own rows.
-- Shared only where the bytes are identical (digest: SHA-256 of the raw
-- rows), so a restore is exactly what was stored.
CREATE TABLE kv_shared_rows (
    id          INTEGER PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    digest      TEXT NOT NULL,
    n_tokens    INTEGER NOT NULL,
    codec       TEXT NOT NULL,
    raw_size    INTEGER NOT NULL,
    checksum    TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    data        BLOB NOT NULL,
    UNIQUE (fingerprint, digest)
);

-- A damaged shared run takes the segments that begin with it along (they
-- are recomputed); a segment deleted or rewritten releases its run, which
-- goes with the last segment naming it.
ALTER TABLE kv_segments ADD COLUMN shared_id INTEGER REFERENCES kv_shared_rows(id) ON DELETE CASCADE;
CREATE INDEX kv_segments_by_shared ON kv_segments(shared_id) WHERE shared_id IS NOT NULL;

CREATE TRIGGER kv_shared_rows_released AFTER DELETE ON kv_segments
WHEN old.shared_id IS NOT NULL BEGIN
    DELETE FROM kv_shared_rows WHERE id = old.shared_id
        AND NOT EXISTS (SELECT 1 FROM kv_segments WHERE shared_id = old.shared_id);
END;

CREATE TRIGGER kv_shared_rows_released_by_update AFTER UPDATE OF shared_id ON kv_segments
WHEN old.shared_id IS NOT NULL AND old.shared_id IS NOT new.shared_id BEGIN
    DELETE FROM kv_shared_rows WHERE id = old.shared_id
        AND NOT EXISTS (SELECT 1 FROM kv_segments WHERE shared_id = old.shared_id);
END;
