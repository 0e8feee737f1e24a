"""What Datasette is told about an archive (`chatdb browse`): the views made for people first,
labelled, full-text search on chat_search, and every table for the machine hidden.

Hidden tables stay reachable by URL (Datasette lists them behind "hidden tables"), as any
SQLite tool would read them: hiding is for a person's first look, not a lock.
"""

TABLES = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"

VIEWS = {
    "chats": {
        "title": "Chats",
        "description": "A conversation a row: its tags (a JSON array), pinned and archived, "
                       "when it began and was last used, the messages on its current path and "
                       "its first question.",
        "facets": ["pinned", "archived"],   # ?_facet_array=tags facets by tag
    },
    "chat_messages": {
        "title": "Messages",
        "description": "A message a row, under the conversation that wrote it: its number on "
                       "the path (the system prompt is 0), role, text, model and tokens; branch "
                       "says which of its siblings it is (an edit or a retry), current whether "
                       "it is on its conversation's current path.",
        "facets": ["role"],   # not `current`: a walk up each path, too long for 1M rows
    },
    "chat_search": {
        "title": "Search",
        "description": "Every message, searched with the archive's full-text index "
                       "(FTS5 syntax: \"a phrase\", prefix*, OR, NOT).",
        "fts_table": "messages_fts",
        "fts_pk": "id",
        "searchmode": "raw",
    },
}


# Datasette's facet suggestions try a facet on every column of every page: on these views,
# whose columns are computed, that is most of a page's time (0.2-0.5 s at 20k messages).
SETTINGS = {"suggest_facets": False}


def metadata(conn, database: str) -> dict:
    """Datasette metadata for the archive that Datasette names `database` (its file's stem)."""
    tables = {row[0]: {"hidden": True} for row in conn.execute(TABLES)}
    return {
        "title": "chatdb",
        "description": "Your conversations with local language models. Chats, Messages and "
                       "Search are made for reading; the tables behind them (tokens, KV state, "
                       "vectors) are hidden.",
        "databases": {database: {"tables": {**tables, **VIEWS}}},
    }
