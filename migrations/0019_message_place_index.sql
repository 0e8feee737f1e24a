-- A message's place beside its id, apart from its text: its tree (depth, root, role), as
-- 0018's messages_shape held, and now its writer too. A search by a tag on many
-- conversations checks each match's writer; looked up in the messages table that is a
-- random read of a row holding its whole text (at 1M messages, 35 ms to check the 3,150
-- matches of a three-word query; 21 ms through this index). One index serves both: the
-- listings and the search name it (INDEXED BY), since for a lookup by id SQLite otherwise
-- always reads the table.
DROP INDEX messages_shape;
CREATE INDEX messages_place ON messages(id, depth, root_id, role, conversation_id);
