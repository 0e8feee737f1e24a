-- A message's place in its tree (depth, root, role) beside its id, apart from its text:
-- `list` counts a conversation's messages from its head's depth and its root's role, and
-- looked up in the messages table each is a random read of a row holding its whole text
-- (62 ms for 10,000 rows of `list --tag` at 1M messages; 8 ms through this index, about
-- 2% of the file). Listings name it (INDEXED BY): for a lookup by id SQLite otherwise
-- always reads the table.
CREATE INDEX messages_shape ON messages(id, depth, root_id, role);
