-- Deleted token arrays, logged so that an index of them (the archive drafter's,
-- engine/decode/archive_index.py) can drop them without reading every array
-- again: it remembers the last row it has seen and reads only the newer ones.
-- A row is one array gone (its message deleted: ON DELETE CASCADE fires the
-- trigger too). Old rows are pruned by the reader; an index that last looked
-- before the oldest row left is rebuilt.
CREATE TABLE message_tokens_deleted (
    id           INTEGER PRIMARY KEY,
    message_id   INTEGER NOT NULL,
    tokenizer_id TEXT NOT NULL
);

CREATE TRIGGER message_tokens_deleted_log AFTER DELETE ON message_tokens BEGIN
    INSERT INTO message_tokens_deleted (message_id, tokenizer_id)
    VALUES (old.message_id, old.tokenizer_id);
END;
