"""An archive whose full-text index is in many segments, as a long history written a turn
at a time leaves it: FTS5's own merging turned off, then a transaction per message."""


def written_apart(archive, texts) -> int:
    """Each of `texts` a message of a new conversation, in a transaction of its own (a
    segment each); the conversation's id."""
    for option, value in (("automerge", 0), ("crisismerge", 64)):
        archive.conn.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES (?, ?)",
                             (option, value))
    conv = archive.create_conversation("notes")
    for text in texts:
        archive.add_message(conv.id, "user", text)
    return conv.id
