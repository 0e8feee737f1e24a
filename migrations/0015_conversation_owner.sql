-- Who a conversation belongs to, on a server several people share (chatdb
-- serve --keys): the name of the key whose request created it. NULL is the
-- archive's own user: the console, the CLI, a server with a single key or none.
-- A request matches, resumes and continues only its own user's conversations
-- (chatdb/message_match.py); the console and the CLI see every conversation.
ALTER TABLE conversations ADD COLUMN owner TEXT;

CREATE INDEX conversations_by_owner ON conversations(owner, updated_at DESC, id DESC);
