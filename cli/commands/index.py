"""`chatdb index`: embed the messages that have no vectors yet, for search by meaning."""

from chatdb.search.index_upkeep import segments as text_segments

from .. import output
from ..interrupt import quit_on_signals
from ..meaning import add_embed_option
from ..options import add_command, open_archive
from ..progress import ProgressBar

DESCRIPTION = """\
Embed every message that has no vectors yet (an imported history, an
archive from before search by meaning) with the embedding model, so that
`chatdb search` and /search find it by meaning. New messages are embedded
as they are written; this catches up with the rest. Long messages are
embedded in passages of up to 256 tokens.

Each batch of messages is committed as it is done: Ctrl-C (or a kill) keeps
what was indexed, and the next `chatdb index` carries on from there. Another
embedding model (--embed-model) makes another index beside this one. A
progress bar is drawn on a terminal only.

The full-text index is merged into one segment when it is in many (a search
then seeks fewer b-trees); the console and the server keep it so as chats are
written, on the thread that embeds them.

JSON: {model, embedded, passages, already, seconds, messages_per_s, indexes:
[{model, messages, passages}], text_index: {segments, merge_steps}}"""


def register(subparsers) -> None:
    parser = add_command(subparsers, "index", run, help="embed messages for search by meaning",
                         description=DESCRIPTION)
    add_embed_option(parser)


def run(args) -> int:
    from engine.embed.embedder import Embedder  # loads llama.cpp
    from engine.embed.indexer import Indexer
    from engine.machine.threads import ThreadTuner

    with open_archive(args) as archive, quit_on_signals():
        embedder = Embedder.open(archive, args.embed_model, threads=ThreadTuner().choice.batch)
        if embedder is None:
            output.error("search by meaning is off (--embed-model off): nothing to index")
            return 2
        bar = ProgressBar("indexing", unit="messages")
        indexer = Indexer(archive, embedder)
        try:
            report = indexer.run(progress=bar.update)
        except KeyboardInterrupt:
            bar.close()
            done = indexer.report.embedded if indexer.report else 0
            output.note(f"stopped: {done:,} messages indexed are kept; `chatdb index` carries on")
            raise
        finally:
            bar.close()
            embedder.close()
        indexes = archive_indexes(archive)
        merged = archive.merge_text_index()
        segments = text_segments(archive.conn)
    if args.json:
        output.print_json({"model": report.model, "embedded": report.embedded,
                           "passages": report.chunks, "already": report.already,
                           "seconds": round(report.seconds, 3),
                           "messages_per_s": round(report.per_second, 1), "indexes": indexes,
                           "text_index": {"segments": segments, "merge_steps": merged}})
    else:
        output.print_text(f"embedded {report.embedded:,} messages ({report.chunks:,} passages) "
                          f"with {report.model} in {report.seconds:.1f} s"
                          + (f", {report.per_second:.1f} messages/s" if report.embedded else "")
                          + f"; {report.already:,} had vectors already")
        if merged:
            output.print_text(f"merged the text index into {segments} segment(s) in {merged} steps")
    return 0


def archive_indexes(archive) -> list[dict]:
    from chatdb.search.vectors import VectorStore

    return [{"model": i.name, "messages": i.messages, "passages": i.chunks}
            for i in VectorStore(archive.conn).indexes()]
