-- Views made for people: what `chatdb sql`, Datasette or any SQLite tool should
-- be shown of the archive instead of token arrays, KV rows and internal tables.
-- A view is always current (it is a query, not a copy), and none of them holds a
-- BLOB: tokens are counted, KV state is not shown at all.

-- A conversation per row. `messages` and `first_message` are of its current
-- path (the one its head ends), the system prompt left out as the console
-- numbers them; `tags` is a JSON array (Datasette facets on it).
CREATE VIEW chats AS
SELECT
    c.id,
    c.title,
    (SELECT json_group_array(name) FROM (
        SELECT t.name FROM conversation_tags ct JOIN tags t ON t.id = ct.tag_id
        WHERE ct.conversation_id = c.id ORDER BY t.key)) AS tags,
    c.pinned,
    c.archived,
    c.created_at AS created,
    c.updated_at AS updated,
    coalesce(h.depth + 1 - coalesce(r.role = 'system', 0), 0) AS messages,
    (WITH RECURSIVE up(id, parent_id, depth) AS (
        SELECT id, parent_id, depth FROM messages WHERE id = c.head_id
        UNION ALL
        SELECT m.id, m.parent_id, m.depth FROM messages m JOIN up ON m.id = up.parent_id)
     SELECT p.content FROM up JOIN messages p ON p.id = up.id
     WHERE p.role = 'user' ORDER BY up.depth LIMIT 1) AS first_message,
    c.model,
    c.uid
FROM conversations c
LEFT JOIN messages h ON h.id = c.head_id
LEFT JOIN messages r ON r.id = h.root_id;

-- A message per row, under the conversation that wrote it (a fork's shared
-- start is its origin's). `position` is its number on the path as /history
-- gives it (the system prompt is 0); `branch` says which of its siblings it
-- is ('2 of 3': an edit or a retry), NULL for an only child; `current` is 1
-- when it is on its conversation's current path, 0 on an older branch.
-- `tokens`: what it adds to the prompt, as last tokenized (NULL: not yet).
CREATE VIEW chat_messages AS
SELECT
    m.id,
    m.conversation_id AS conversation,
    c.title,
    m.depth + 1 - coalesce(r.role = 'system', 0) AS position,
    m.role,
    m.content AS text,
    m.status,
    m.created_at AS created,
    coalesce(json_extract(m.meta, '$.model'), CASE WHEN m.role = 'assistant' THEN c.model END) AS model,
    (SELECT max(n_tokens) FROM message_tokens WHERE message_id = m.id) AS tokens,
    CASE WHEN m.parent_id IS NOT NULL
              AND (SELECT count(*) FROM messages s WHERE s.parent_id = m.parent_id) > 1
         THEN (SELECT count(*) FROM messages s WHERE s.parent_id = m.parent_id AND s.id <= m.id)
              || ' of ' || (SELECT count(*) FROM messages s WHERE s.parent_id = m.parent_id)
    END AS branch,
    -- The head's ancestors, walked up only as far as the message's own depth.
    (WITH RECURSIVE above(id) AS (
        VALUES (c.head_id)
        UNION ALL
        SELECT p.parent_id FROM messages p, above WHERE p.id = above.id AND p.depth > m.depth)
     SELECT count(*) FROM above WHERE above.id = m.id) AS current,
    m.uid
FROM messages m
LEFT JOIN conversations c ON c.id = m.conversation_id
LEFT JOIN messages r ON r.id = m.root_id;

-- For full-text search: a row per message, its id the rowid of the archive's
-- full-text index (messages_fts), which Datasette is told to search
-- (`chatdb browse` writes that into its metadata). In SQL:
--   SELECT * FROM chat_search WHERE id IN
--       (SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'borrow checker')
-- (Its columns are chat_messages' own: SQLite reads only those a query names.)
CREATE VIEW chat_search AS
SELECT id, conversation, title, role, text, created FROM chat_messages;
