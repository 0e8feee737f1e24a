"""`tag:NAME` inside a search query: the tags it names, and the query without them.

    split_tags('tag:rust tag:"machine learning" borrow checker')
    -> ('borrow checker', ['rust', 'machine learning'])

A tag with spaces is quoted. FTS5 would read `tag:x` as a column filter on a
column the index does not have, so the form means nothing else in a query.
"""

import re

TAG_TERM = re.compile(r'(?<!\S)tag:(?:"([^"]*)"|(\S+))', re.IGNORECASE)


def split_tags(query: str) -> tuple[str, list[str]]:
    """(the query without its tag: terms, the tags they name in order)."""
    tags = [m[1] if m[1] is not None else m[2] for m in TAG_TERM.finditer(query)]
    if not tags:
        return query, []
    return " ".join(TAG_TERM.sub(" ", query).split()), tags
