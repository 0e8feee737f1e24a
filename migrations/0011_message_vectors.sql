-- Search by meaning: each message's vectors, per embedding model. A
-- message is embedded in chunks (a long one in several); each chunk's vector
-- is stored as int8 (a unit vector scaled by 127: a quarter of float32,
-- ranking as float32 does to within rounding). An embedding model is named by
-- a fingerprint of its file and of how messages are chunked: vectors of
-- another model are another index, never compared with these.
CREATE TABLE embedding_models (
    id          INTEGER PRIMARY KEY,
    fingerprint TEXT NOT NULL UNIQUE,
    name        TEXT NOT NULL,                   -- the model file's name, for people
    dims        INTEGER NOT NULL,
    created_at  TEXT NOT NULL,
    -- Rows of message_vectors deleted so far: a process holding the vectors
    -- in memory reloads them when this changes (new rows it reads by id).
    deletions   INTEGER NOT NULL DEFAULT 0
);

-- A message with nothing to embed (blank) has one row with an empty vector,
-- so that it is not taken for one still to be embedded.
CREATE TABLE message_vectors (
    id         INTEGER PRIMARY KEY,
    model_id   INTEGER NOT NULL REFERENCES embedding_models(id) ON DELETE CASCADE,
    message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    chunk      INTEGER NOT NULL,
    start      INTEGER NOT NULL,                 -- the chunk's first character in the message
    vector     BLOB NOT NULL,
    UNIQUE (message_id, model_id, chunk)
);
CREATE INDEX message_vectors_by_model ON message_vectors(model_id, id);

CREATE TRIGGER message_vectors_deleted AFTER DELETE ON message_vectors BEGIN
    UPDATE embedding_models SET deletions = deletions + 1 WHERE id = old.model_id;
END;

-- Messages never change once written; should one ever, its vectors describe
-- the old text and go.
CREATE TRIGGER message_vectors_stale AFTER UPDATE OF content ON messages
WHEN old.content IS NOT new.content BEGIN
    DELETE FROM message_vectors WHERE message_id = new.id;
END;
