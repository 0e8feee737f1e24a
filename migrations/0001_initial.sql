-- The archive: a forest of messages, conversations pointing into it,
-- the tokens the model saw, KV state, and the full-text index.

CREATE TABLE conversations (
    id            INTEGER PRIMARY KEY,
    uid           TEXT NOT NULL UNIQUE,          -- stable across export/import
    title         TEXT NOT NULL DEFAULT '',
    head_id       INTEGER REFERENCES messages(id) ON DELETE SET NULL,
    system_prompt TEXT,
    model         TEXT,
    created_at    TEXT NOT NULL,                 -- ISO 8601 UTC, sorts as text
    updated_at    TEXT NOT NULL,
    meta          TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX conversations_by_updated ON conversations(updated_at DESC, id DESC);
CREATE INDEX conversations_by_head ON conversations(head_id);

CREATE TABLE messages (
    id              INTEGER PRIMARY KEY,
    uid             TEXT NOT NULL UNIQUE,
    parent_id       INTEGER REFERENCES messages(id),
    -- The conversation that wrote this message: what it owns is kept while it
    -- lives, even off its current path (old branches). NULL once that
    -- conversation is deleted and only forks still reach the message.
    conversation_id INTEGER REFERENCES conversations(id) ON DELETE SET NULL,
    depth           INTEGER NOT NULL,            -- 0 for a root: path length - 1
    role            TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
    content         TEXT NOT NULL,
    status          TEXT NOT NULL DEFAULT 'complete'
                    CHECK (status IN ('complete', 'interrupted')),
    created_at      TEXT NOT NULL,
    meta            TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX messages_by_parent ON messages(parent_id);
CREATE INDEX messages_by_conversation ON messages(conversation_id);

-- Exact tokens a message adds to the prompt, per tokenizer + chat template.
CREATE TABLE message_tokens (
    message_id   INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    tokenizer_id TEXT NOT NULL,
    n_tokens     INTEGER NOT NULL,
    tokens       BLOB NOT NULL,                  -- int32 little-endian
    PRIMARY KEY (message_id, tokenizer_id)
) WITHOUT ROWID;

-- KV state per message and engine fingerprint. kind 'rows': the KV rows of
-- exactly this message's tokens (restored by concatenation along the path);
-- kind 'snapshot': the whole sequence state up to and including the message.
CREATE TABLE kv_segments (
    message_id  INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    fingerprint TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('rows', 'snapshot')),
    n_tokens    INTEGER NOT NULL,
    codec       TEXT NOT NULL,
    raw_size    INTEGER NOT NULL,
    checksum    TEXT NOT NULL,                   -- of the raw bytes
    created_at  TEXT NOT NULL,
    data        BLOB NOT NULL,
    PRIMARY KEY (message_id, fingerprint, kind)
);
CREATE INDEX kv_segments_by_fingerprint ON kv_segments(fingerprint, message_id);

-- Fingerprints of model files, so a 100 MB file is hashed once, not per start.
CREATE TABLE file_fingerprints (
    path        TEXT NOT NULL,
    size        INTEGER NOT NULL,
    mtime_ns    INTEGER NOT NULL,
    fingerprint TEXT NOT NULL,
    PRIMARY KEY (path, size, mtime_ns)
) WITHOUT ROWID;

-- Full-text index. It keeps its own copy of the indexed text because that
-- text is prepared in Python (CJK runs split into characters, so a substring
-- is a phrase); rowid is messages.id, an INTEGER PRIMARY KEY that VACUUM
-- never renumbers. Text is tiny next to KV state, so the copy costs little.
CREATE VIRTUAL TABLE messages_fts USING fts5(
    body,
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    DELETE FROM messages_fts WHERE rowid = old.id;
END;
