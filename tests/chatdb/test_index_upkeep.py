"""The full-text index merged into one segment when it is in many: after an import, by a
call, stopped between steps; searches find the same before and after."""

import json

from chatdb.archive import Archive
from chatdb.search.fulltext import search
from chatdb.search.index_upkeep import MOST_SEGMENTS, merge_segments, segments
from chatdb.transfer.export_json import export_document
from chatdb.transfer.importer import import_bytes

from ..fts_segments import written_apart

WORDS = ["lifetime", "borrow", "kyoto", "garden", "monad", "trains"]


def notes(archive, n: int) -> None:
    written_apart(archive, [f"{WORDS[i % len(WORDS)]} note {i}" for i in range(n)])


def hits(archive, query):
    return [(hit.message_id, hit.snippet) for hit in search(archive.conn, query, limit=50)]


def test_many_segments_become_one_and_searches_find_the_same(tmp_path):
    with Archive.open(tmp_path / "a.db") as archive:
        notes(archive, MOST_SEGMENTS + 8)
        many = segments(archive.conn)
        assert many > MOST_SEGMENTS
        before = {q: hits(archive, q) for q in [*WORDS, "note", "borrow OR kyoto", "note 1*"]}
        assert archive.merge_text_index() >= 2      # a negative step, then until none works
        assert segments(archive.conn) == 1
        assert {q: hits(archive, q) for q in before} == before
        archive.conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")
        assert archive.merge_text_index() == 0      # one segment: nothing to do, no write
        assert archive.integrity_check() == "ok"


def test_few_segments_are_left_alone(tmp_path):
    with Archive.open(tmp_path / "a.db") as archive:
        notes(archive, 4)
        count = segments(archive.conn)
        assert 1 < count <= MOST_SEGMENTS
        changes = archive.conn.total_changes
        assert archive.merge_text_index() == 0
        assert segments(archive.conn) == count and archive.conn.total_changes == changes


def test_a_stopped_merge_keeps_the_index_whole_and_carries_on(tmp_path):
    with Archive.open(tmp_path / "a.db") as archive:
        notes(archive, MOST_SEGMENTS + 8)
        before = hits(archive, "note")
        assert merge_segments(archive.conn, stop=lambda: True) == 0   # asked before the first
        steps = []
        merge_segments(archive.conn, most=1, stop=lambda: steps.append(1) or len(steps) > 1)
        assert len(steps) == 2 and hits(archive, "note") == before    # one step, then stopped
        archive.merge_text_index()
        assert segments(archive.conn) == 1 and hits(archive, "note") == before


def test_an_import_into_a_many_segment_index_leaves_one(tmp_path):
    with Archive.open(tmp_path / "src.db") as source:
        for word in WORDS:
            conv = source.create_conversation(word)
            source.add_message(conv.id, "user", f"tell me about {word}")
        document = export_document(source)
    with Archive.open(tmp_path / "a.db") as archive:
        notes(archive, MOST_SEGMENTS + 8)
        import_bytes(archive, json.dumps(document).encode(), "export.json")
        assert segments(archive.conn) == 1
        assert len(hits(archive, "tell")) == len(WORDS)
