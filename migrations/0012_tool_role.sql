-- Tool results are messages of the tree (chatdb serve's tool calling): the
-- role 'tool' joins system, user and assistant. An assistant message that
-- calls tools holds the calls as the model wrote them; a tool message holds
-- a result, its call's id in meta.
--
-- Widening a CHECK constraint changes no stored row, so the table is not
-- rebuilt (a rebuild would drop and re-add every foreign key to it): the
-- schema text is edited in place, as SQLite's ALTER TABLE documentation
-- describes for loosening a constraint, and the schema reloaded. Creating
-- and dropping a table bumps the schema cookie, so that every other open
-- connection reloads it too.
PRAGMA writable_schema = ON;
UPDATE sqlite_master
SET sql = replace(sql, 'CHECK (role IN (''system'', ''user'', ''assistant''))',
                       'CHECK (role IN (''system'', ''user'', ''assistant'', ''tool''))')
WHERE type = 'table' AND name = 'messages';
PRAGMA writable_schema = RESET;
CREATE TABLE schema_cookie_bump (x);
DROP TABLE schema_cookie_bump;
