-- A hash of each message's role and content, so the server can find the
-- longest stored path equal to a request's messages with one indexed query
-- (chatdb/message_match.py). chatdb_content_hash() is registered on every
-- chatdb connection (chatdb/content_hash.py); the triggers keep the column
-- true when a message is written or its text finished.
ALTER TABLE messages ADD COLUMN content_hash INTEGER;

UPDATE messages SET content_hash = chatdb_content_hash(role, content);

-- Roots are found by (hash, NULL parent), children by (hash, parent).
CREATE INDEX messages_by_content_hash ON messages(content_hash, parent_id);

CREATE TRIGGER messages_content_hash_insert AFTER INSERT ON messages BEGIN
    UPDATE messages SET content_hash = chatdb_content_hash(new.role, new.content)
    WHERE id = new.id;
END;

CREATE TRIGGER messages_content_hash_update AFTER UPDATE OF role, content ON messages BEGIN
    UPDATE messages SET content_hash = chatdb_content_hash(new.role, new.content)
    WHERE id = new.id;
END;
