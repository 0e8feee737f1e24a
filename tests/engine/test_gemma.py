"""A second model with sliding-window attention: Gemma 3 270M (window 512, no chat template).

Its KV is stored as rows: every token's rows of the full-attention layers,
and per message the sliding-window rows of its last window of tokens. The
first message here is longer than the window, so restores rebuild states
whose window reaches back over several messages.
"""

import shutil

import pytest

from chatdb.archive import Archive
from engine.llama.sampling import SamplingSettings

from .conftest import assert_refused, restored_from_archive, run_chatdb

GREEDY_ARGS = ("--temperature", "0", "--seed", "1", "--max-tokens", "24", "--ctx", "2048")  # as GREEDY
LONG = " ".join(f"Item {i} is a {('red', 'green', 'blue', 'small', 'large')[i % 5]} box."
                for i in range(64))  # about 570 tokens: more than the window
SECOND = "Which item is blue?"
WINDOW = 512


def path_tokens(db, message_id) -> int:
    """Tokens of the path to `message_id`, as stored (one model wrote them)."""
    with Archive.open(db) as archive:
        ids = [m.id for m in archive.path(message_id)]
        marks = ",".join("?" * len(ids))
        return archive.conn.execute(
            f"SELECT sum(n_tokens) FROM message_tokens WHERE message_id IN ({marks})", ids).fetchone()[0]


def kv_tokens(db, through: int, fingerprint: str) -> int:
    """Tokens of KV stored under `fingerprint` along the path to `through`."""
    with Archive.open(db) as archive:
        ids = [m.id for m in archive.path(through)]
        marks = ",".join("?" * len(ids))
        return archive.conn.execute(
            f"SELECT sum(n_tokens) FROM kv_segments WHERE fingerprint = ? AND message_id IN ({marks})",
            [fingerprint, *ids]).fetchone()[0]


def fingerprints(db) -> set:
    with Archive.open(db) as archive:
        return {fp for (fp,) in archive.conn.execute("SELECT DISTINCT fingerprint FROM kv_segments")}


@pytest.fixture(scope="module")
def asked_long(tmp_path_factory, gemma_path):
    """(an archive after `ask LONG` with Gemma, that command's JSON), made once for the module
    and only read: each test copies it."""
    db = tmp_path_factory.mktemp("asked-long") / "a.db"
    first, _ = run_chatdb("ask", "--json", "--model", str(gemma_path), *GREEDY_ARGS, LONG, db=db)
    return db, first


@pytest.fixture
def gemma_engine(open_engine, gemma_path):
    def factory(db=None, **kw):
        return open_engine(db, model_path=gemma_path, n_ctx=2048, **kw)
    return factory


def test_gemma_stores_rows_and_a_window_and_restores_the_live_state(gemma_engine):
    archive, engine = gemma_engine()
    assert engine.kv_mode == "rows+window" and engine.layout.window == WINDOW
    assert engine.describe()["model"]["chat_template"] == "llama.cpp:gemma"
    conv = archive.create_conversation("g")
    live = []
    for text in (LONG, SECOND):
        result = engine.reply(conv.id, text)
        live.append((result.message_id, bytes(engine.model.get_state())))
    engine.flush()
    layout = engine.layout
    rows = archive.conn.execute(
        "SELECT message_id, kind, n_tokens, raw_size FROM kv_segments ORDER BY message_id").fetchall()
    assert [r["kind"] for r in rows] == ["rows"] * 4
    tails = [layout.tail(r["n_tokens"], r["raw_size"]) for r in rows]
    # Each message keeps its last window of sliding-window rows: the long
    # question (captured at its end, before the answer pushed it out of the
    # window) a whole window, the short ones all of theirs.
    assert rows[0]["n_tokens"] > WINDOW and tails[0] == WINDOW
    assert tails[1:] == [r["n_tokens"] for r in rows[1:]]
    # Storage: every token's full-attention rows plus the windows, no whole states.
    assert sum(r["raw_size"] for r in rows) == sum(
        n * layout.row_bytes_per_token + t * layout.part_bytes(1)
        for n, t in zip([r["n_tokens"] for r in rows], tails))
    # At each answer, the state rebuilt from rows is what llama.cpp held live, byte for byte.
    for message_id, state in live:
        assert restored_from_archive(engine, archive, message_id) == state


def test_gemma_resume_and_forks_in_new_processes(tmp_path, gemma_engine, gemma_path, asked_long):
    model = ("--model", str(gemma_path))
    archive, engine = gemma_engine(tmp_path / "one.db")
    conv = archive.create_conversation("x")
    engine.reply(conv.id, LONG)
    expected = engine.reply(conv.id, SECOND)

    db, first = tmp_path / "two.db", asked_long[1]
    shutil.copy(asked_long[0], db)
    second, _ = run_chatdb("ask", "--json", "-c", *model, *GREEDY_ARGS, SECOND, db=db)
    assert second["text"] == expected.text
    assert second["kv"]["source"] == "archive"
    assert second["kv"]["restored_tokens"] == path_tokens(db, first["message_id"])

    # A fork from the first answer restores everything through it. A question
    # asked from the long question becomes its sibling (questions never chain),
    # so it shares nothing to restore.
    fork, _ = run_chatdb("ask", "--json", "--fork-from", str(first["message_id"]), *model,
                         *GREEDY_ARGS, "And which is red?", db=db)
    assert fork["kv"]["source"] == "archive"
    assert fork["kv"]["restored_tokens"] == path_tokens(db, first["message_id"])
    retry, _ = run_chatdb("ask", "--json", "--fork-from", str(first["user_message_id"]), *model,
                          *GREEDY_ARGS, "Count them.", db=db)
    with Archive.open(db) as archive:
        assert archive.message(retry["user_message_id"]).parent_id is None
    assert retry["kv"]["restored_tokens"] == 0


def test_segments_are_read_while_the_model_loads(tmp_path, gemma_engine, asked_long):
    """`ask -c`'s head start: the rows (with their windows) are decompressed while the
    model loads, under the fingerprint of the model's KV mode."""
    db, first = tmp_path / "a.db", asked_long[1]
    shutil.copy(asked_long[0], db)
    shutil.copy(asked_long[0], tmp_path / "b.db")
    archive, engine = gemma_engine(db, resume=first["message_id"])
    assert len(engine.cache.early) == 2   # the long question and its answer
    conv_id = archive.latest_conversation().id
    result = engine.reply(conv_id, SECOND)
    assert result.kv_source == "archive" and not engine.cache.early
    _, plain = gemma_engine(tmp_path / "b.db")
    assert plain.reply(conv_id, SECOND).text == result.text


def test_switching_models_in_one_conversation(tmp_path, gemma_path, model_path):
    """SmolLM2 -> Gemma -> SmolLM2 -> Gemma: each restores its own KV of the shared history."""
    db = tmp_path / "a.db"
    args = ("--temperature", "0", "--seed", "1", "--max-tokens", "12", "--ctx", "2048")
    smol = ("--model", str(model_path))
    gemma = ("--model", str(gemma_path))
    one, _ = run_chatdb("ask", "--json", *smol, *args, "Name a river.", db=db)
    (smol_fp,) = fingerprints(db)
    two, _ = run_chatdb("ask", "--json", "-c", *gemma, *args, "Name a lake.", db=db)
    assert two["kv"]["source"] == "none"  # Gemma reads the history once
    (gemma_fp,) = fingerprints(db) - {smol_fp}
    three, _ = run_chatdb("ask", "--json", "-c", *smol, *args, "Name a sea.", db=db)
    assert three["kv"]["source"] == "archive"
    assert three["kv"]["restored_tokens"] == kv_tokens(db, one["message_id"], smol_fp)
    four, _ = run_chatdb("ask", "--json", "-c", *gemma, *args, "Name an ocean.", db=db)
    assert four["kv"]["source"] == "archive"
    assert four["kv"]["restored_tokens"] == kv_tokens(db, two["message_id"], gemma_fp)


def test_draft_model_with_another_vocabulary_is_refused(tmp_path, gemma_path, model_path):
    _, proc = run_chatdb("ask", "--model", str(gemma_path), "--draft", "auto", "--draft-model",
                         str(model_path), "--max-tokens", "4", "Hi", db=tmp_path / "a.db",
                         check=False)
    assert_refused(proc, "vocabulary")


def test_doctor_names_the_memory_and_its_storage(tmp_path, gemma_path):
    doc, _ = run_chatdb("doctor", "--json", "--model", str(gemma_path), db=tmp_path / "a.db")
    assert doc["kv"]["memory"] == "iswa" and doc["kv"]["stored_as"] == "rows + window"
    assert doc["kv"]["type"] == "f16"
    assert doc["kv"]["window"] == WINDOW and doc["kv"]["bytes_per_token"] == 3072
    _, proc = run_chatdb("doctor", "--model", str(gemma_path), db=tmp_path / "a.db")
    assert "KV state: rows + window, f16 (attention with sliding-window layers, window 512 tokens)" \
        in proc.stdout


def test_a_state_restored_past_the_window_serves_a_branch_only_where_its_rows_hold(gemma_engine,
                                                                                    tmp_path):
    """A chat longer than the window, switched away from and back: its state comes from
    memory, widened, with zeros for the sliding-window rows llama.cpp did not keep. A new chat
    sharing most of its first message must not be served from that state (or from the live
    sequence it was loaded into) cut back there: the first new token's window would reach
    those zeros (its log-probability was -0.142 where computed it is -0.122). It is computed
    instead, and its log-probabilities are a fresh engine's, bit for bit."""
    settings = SamplingSettings(temperature=0, max_tokens=8, seed=1, logprobs=1)
    branch = LONG + " Which item is red?"
    archive, engine = gemma_engine(use_kv=False)
    long = archive.create_conversation("long")
    engine.reply(long.id, LONG, sampling=settings)
    engine.reply(archive.create_conversation("other").id, "Say hi.", sampling=settings)
    from_memory = engine.reply(archive.create_conversation("b").id, branch, sampling=settings)
    engine.reply(long.id, SECOND, sampling=settings)   # the long chat, from memory whole
    assert engine.cache.seq.window_from > 0
    from_live = engine.reply(archive.create_conversation("c").id, branch, sampling=settings)

    fresh_archive, fresh = gemma_engine(tmp_path / "fresh.db", use_kv=False)
    expected = fresh.reply(fresh_archive.create_conversation("b").id, branch, sampling=settings)
    assert len(expected.logprobs) == 8
    for result in (from_memory, from_live):
        assert result.kv_source not in ("memory", "live") or result.restored_tokens < WINDOW
        assert result.text == expected.text
        assert result.logprobs == expected.logprobs   # each token's, and its alternatives'
