"""Search by meaning for the front-ends: the embedding model chosen once, loaded when needed.

    meaning = MeaningSearch(archive, args.embed_model)
    by, note = meaning.choose_by(args.by)        # "both" where an index exists, else "words"
    hits = search(conn, text, by=by, meaning=meaning.query(text) if by != "words" else None)

`--embed-model PATH` (or CHATDB_EMBED_MODEL) names any GGUF embedding model,
`off` none; the default is all-MiniLM-L6-v2 as `make install` converts it.
"""

import argparse
from contextlib import contextmanager

from chatdb.errors import ChatdbError
from chatdb.search.hybrid import Meaning
from chatdb.search.vectors import VectorStore

EMBED_HELP = ("a GGUF embedding model for search by meaning (default: $CHATDB_EMBED_MODEL, else "
              "all-MiniLM-L6-v2; off: none)")
NO_INDEX = "no index by meaning in this archive yet (`chatdb index` builds it): searching by words"


def add_embed_option(parser, quiet: bool = False) -> None:
    parser.add_argument("--embed-model", metavar="PATH",
                        default=argparse.SUPPRESS if quiet else None, help=EMBED_HELP)


class MeaningSearch:
    def __init__(self, archive, explicit: "str | None" = None):
        from engine.embed.model_path import resolve_embed_path  # no llama.cpp yet

        self.archive, self.explicit = archive, explicit
        self.path = resolve_embed_path(explicit, required=explicit is not None)
        self._fingerprint: "str | None" = None
        self._embedder = None

    @property
    def name(self) -> str:
        return self.path.name if self.path else "no embedding model"

    @property
    def fingerprint(self) -> "str | None":
        if self.path is not None and self._fingerprint is None:
            from engine.embed.embedder import embedding_fingerprint

            self._fingerprint = embedding_fingerprint(self.path, self.archive.fingerprints)
        return self._fingerprint

    def model_id(self) -> "int | None":
        """The archive's index of this model, if it has one."""
        return VectorStore(self.archive.conn).model_id(self.fingerprint) if self.path else None

    def choose_by(self, asked: "str | None") -> "tuple[str, str | None]":
        """(how to search, a note to say): `asked` if given (an error if it needs an index
        there is none of), else both where an index exists and words where not."""
        if asked == "words" or (asked is None and self.path is None):
            return "words", None
        if self.model_id() is None:
            if asked is None:
                return "words", NO_INDEX
            why = ("search by meaning is off (--embed-model off)" if self.path is None
                   else f"this archive has no index by meaning of {self.name}: `chatdb index` builds it")
            raise ChatdbError(f"--by {asked}: {why}")
        return asked or "both", None

    def query(self, text: str) -> Meaning:
        if self._embedder is None:
            from engine.embed.embedder import Embedder

            self._embedder = Embedder.open(self.archive, str(self.path), queries_only=True)
        return Meaning(self.model_id(), self._embedder.embed_query(text))

    def background(self, warn):
        """A BackgroundIndexer embedding what this process (and others) write from now on;
        None without an embedding model or a file to index."""
        if self.path is None or self.archive.db_path is None:
            return None
        from engine.embed.background import BackgroundIndexer

        return BackgroundIndexer(self.archive.db_path, self.path,
                                 on_error=lambda exc: warn(f"messages not indexed by meaning: {exc}"))

    def close(self) -> None:
        if self._embedder is not None:
            self._embedder.close()
            self._embedder = None


@contextmanager
def indexing(archive, args):
    """What is written meanwhile is embedded (on a thread of its own), and before leaving."""
    from . import output

    indexer = MeaningSearch(archive, getattr(args, "embed_model", None)).background(output.warning)
    try:
        yield indexer
    finally:
        if indexer is not None:
            indexer.close()
