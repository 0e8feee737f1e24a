-- A conversation's system prompt is the system message at the root of its
-- path: that is what the model reads. conversations.system_prompt was a copy
-- that could disagree with it (an import set only the column; /system wrote
-- the two in separate transactions), so it goes. Instead every message
-- records the root of its tree, which never changes (a message's parent
-- never does), so that a conversation's system prompt and its message count
-- are one lookup from its head, with no walk up the path.
--
-- root_id is not declared a foreign key: a root outlives every message
-- below it (parent_id sees to that), and a foreign key without an index
-- would make every deleted message scan the table.
ALTER TABLE messages ADD COLUMN root_id INTEGER;

WITH RECURSIVE rooted(id, root) AS (
    SELECT id, id FROM messages WHERE parent_id IS NULL
    UNION ALL
    SELECT m.id, rooted.root FROM messages m JOIN rooted ON m.parent_id = rooted.id
)
UPDATE messages SET root_id = rooted.root FROM rooted WHERE messages.id = rooted.id;

ALTER TABLE conversations DROP COLUMN system_prompt;

-- kv_segments.checksum, which 0001 calls a checksum "of the raw bytes": a
-- value 'zstd-xxh64:<hex>' is the zstd frame's own content checksum (the low
-- 32 bits of XXH64 of the compressed content, the byte planes), which zstd
-- verifies as it decompresses; only segments stored before carry
-- 'crc32:<hex>' of the raw bytes. (0001 itself cannot be corrected: every
-- applied migration is checked against its file.)
