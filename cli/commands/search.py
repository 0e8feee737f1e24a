"""`chatdb search QUERY`: every message, best first, by its words and by its meaning."""

from chatdb.records import ROLES
from chatdb.search.fulltext import MARK_END, MARK_START, mark
from chatdb.search.hybrid import BY, search
from chatdb.search.tag_terms import split_tags
from chatdb.tags import TagError, tag_keys

from .. import output, refs
from ..meaning import MeaningSearch, add_embed_option
from ..options import add_command, open_archive, positive_int

JSON_MARK = "**"  # around matched words in --json snippets, and in plain text without colour

DESCRIPTION = f"""\
Search every message (all conversations, all branches), best match first,
by its words (full-text, bm25) and by its meaning (the cosine similarity of
embeddings), the two rankings fused. Without --by: both where the archive
has an index by meaning (`chatdb index` builds it; new messages are added
as they are written), else words. FTS5 syntax works ("a phrase", prefix*,
OR, NOT, NEAR(...)); other text is searched as plain words. `tag:NAME` (or
tag:"two words") in the query, like --tag, keeps to the conversations with
that tag.

In the snippets, matched words are highlighted in a terminal and wrapped in
{JSON_MARK} otherwise (NO_COLOR set, output not a terminal, or --json). A
hit found by meaning alone shows the start of its nearest passage.

JSON: [{{conversation_id, message_id, role, snippet, title, created_at,
score, ranks: {{words, meaning}}, similarity}}, ...]: score is bm25 (lower is
better; 0 for a hit not matched by words), ranks the hit's place in each
ranking (null: not among its best 50), similarity the cosine of the query and
the message's nearest passage (null by words).

Dates (--since, --until) are ISO 8601: 2024-05-01 or 2024-05-01T14:30, UTC
unless an offset is given; a bare --until date includes that whole day."""


def register(subparsers) -> None:
    parser = add_command(subparsers, "search", run, help="search messages", description=DESCRIPTION)
    parser.add_argument("query", metavar="QUERY", nargs="+", help="words to look for")
    parser.add_argument("--limit", type=positive_int, default=20, metavar="N",
                        help="at most N hits (default 20)")
    parser.add_argument("--conv", metavar="CONV", help="only in this conversation (number or uid)")
    parser.add_argument("--role", choices=ROLES, help="only messages by this role")
    parser.add_argument("--user", metavar="NAME",
                        help="only what this shared server user's conversations reach")
    parser.add_argument("--since", metavar="DATE", help="only messages from DATE on")
    parser.add_argument("--until", metavar="DATE", help="only messages up to DATE")
    parser.add_argument("--tag", action="append", default=[], metavar="TAG",
                        help="only in conversations with this tag (repeat it: all must match; "
                             "tag:NAME in the query says the same)")
    parser.add_argument("--by", choices=BY, help="rank by words, meaning or both (default: both "
                        "where the archive has an index by meaning, else words)")
    add_embed_option(parser)


def run(args) -> int:
    text, tags = split_tags(" ".join(args.query))
    tags += args.tag
    try:
        tag_keys(tags)
    except TagError as exc:
        output.error(str(exc))
        return 2
    if tags and not text.strip():
        output.error("give the words to look for: a tag only narrows a search")
        return 2
    with open_archive(args) as archive:
        conv_id = refs.conversation(archive, args.conv).id if args.conv else None
        meaning = MeaningSearch(archive, args.embed_model) if args.by != "words" else None
        try:
            by, note = meaning.choose_by(args.by) if meaning else ("words", None)
            hits = search(archive.conn, text, by=by,
                          meaning=meaning.query(text) if by != "words" and text.strip() else None,
                          limit=args.limit, conversation_id=conv_id, role=args.role,
                          since=args.since, until=args.until, tags=tags, owner=args.user)
        finally:
            if meaning:
                meaning.close()
    if args.json:
        output.print_json([_hit_json(hit) for hit in hits])
        return 0
    if note:  # after the hits: a failed search says only why it failed
        output.note(note)
    color = output.use_color()
    for number, hit in enumerate(hits):
        if number:
            output.print_text()
        title = output.one_line(hit.title or "") or "(untitled)"
        output.print_text(output.dim(
            f"{hit.conversation_id}/{hit.message_id}  {title} · {hit.role} · "
            f"{output.minute(hit.created_at)}", color))
        output.print_text("  " + _snippet(hit.snippet, color))
    return 0


def _hit_json(hit) -> dict:
    return {"conversation_id": hit.conversation_id, "message_id": hit.message_id,
            "role": hit.role, "snippet": mark(hit.snippet, JSON_MARK, JSON_MARK),
            "title": hit.title, "created_at": hit.created_at, "score": hit.score,
            "ranks": {"words": hit.words_rank, "meaning": hit.meaning_rank},
            "similarity": None if hit.similarity is None else round(hit.similarity, 4)}


def _snippet(snippet: str, color: bool) -> str:
    text = " ".join(output.safe(snippet, keep=MARK_START + MARK_END).split())
    if color:
        return mark(text, output.HIGHLIGHT, output.RESET)
    return mark(text, JSON_MARK, JSON_MARK)
