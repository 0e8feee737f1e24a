-- Tags, pins and the archived flag: how a person keeps a year of chats in order.
--
-- A tag is named as its author wrote it (`name`) and matched by `key`, the
-- name case-folded (Unicode NFC, then casefold): "Rust" and "rust" are one
-- tag, the first spelling used is the one shown. A tag lives while some
-- conversation carries it.
CREATE TABLE tags (
    id   INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    key  TEXT NOT NULL UNIQUE
);

CREATE TABLE conversation_tags (
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    tag_id          INTEGER NOT NULL REFERENCES tags(id) ON DELETE CASCADE,
    PRIMARY KEY (conversation_id, tag_id)
) WITHOUT ROWID;
-- `list --tag` starts from the tag: the conversations carrying it.
CREATE INDEX conversation_tags_by_tag ON conversation_tags(tag_id, conversation_id);

CREATE TRIGGER tags_unused AFTER DELETE ON conversation_tags BEGIN
    DELETE FROM tags WHERE id = old.tag_id
        AND NOT EXISTS (SELECT 1 FROM conversation_tags WHERE tag_id = old.tag_id);
END;

-- Pinned conversations come first in `list`; archived ones are left out of
-- it unless asked for. Both are 0 or 1.
ALTER TABLE conversations ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1));
ALTER TABLE conversations ADD COLUMN archived INTEGER NOT NULL DEFAULT 0 CHECK (archived IN (0, 1));

-- `list`'s order (pinned first, then the most recently updated), within
-- the archived or the rest: read in index order, a page costs its rows.
CREATE INDEX conversations_listed ON conversations(archived, pinned DESC, updated_at DESC, id DESC);
