"""The chats the recurrent and hybrid tests share: turns whose live states are kept, and a
chat past the first 2,048-token stretch forked from a superseded checkpoint.

A recurrent state is kept as checkpoints (heads, branch points, the deepest of each
2,048-token stretch), so these chats are shaped to land on either side of a stretch.
"""

from chatdb.archive import Archive

from .conftest import run_chatdb
from .test_gemma import path_tokens

ARGS = ("--temperature", "0", "--seed", "1", "--max-tokens", "24", "--ctx", "4096")  # as GREEDY
# About 1,900 tokens: the answer to it ends in the first 2,048-token stretch of the path,
# the next answers in the second (the writer keeps the deepest checkpoint of each).
LONG = " ".join(f"Item {i} is a {('red', 'green', 'blue', 'small', 'large')[i % 5]} box."
                for i in range(200))
SECOND, THIRD, FORK = "Which item is blue? " * 20, "And which is red?", "Count them."


def segments(db):
    with Archive.open(db) as archive:
        return [tuple(r) for r in archive.conn.execute(
            "SELECT message_id, kind, n_tokens, raw_size FROM kv_segments ORDER BY message_id, kind")]


def live_states(engine, conv_id: int) -> list:
    """Four short turns: (answer id, the state llama.cpp held after it) of each."""
    live = []
    for text in ("Hello there.", "Tell me more.", "And then?", "Why?"):
        result = engine.reply(conv_id, text)
        live.append((result.message_id, bytes(engine.model.get_state())))
    engine.flush()
    return live


def past_a_stretch(db, model_path):
    """Three asks, each in a new process: the first answer ends in the first stretch, the
    second past it. Their JSON, and the path's tokens through each answer."""
    model = ("--model", str(model_path))
    one, _ = run_chatdb("ask", "--json", *model, *ARGS, LONG, db=db)
    two, _ = run_chatdb("ask", "--json", "-c", *model, *ARGS, SECOND, db=db)
    three, _ = run_chatdb("ask", "--json", "-c", *model, *ARGS, THIRD, db=db)
    ends = [path_tokens(db, m["message_id"]) for m in (one, two, three)]
    assert ends[0] < 2048 <= ends[1]
    return one, two, three, ends


def assert_fork_restores_the_first_stretch(db, model_path, one, two, ends, fresh_engine):
    """A fork from the second answer (its checkpoint superseded) restores exactly through
    the first answer, and what it computes from there is what reading it all from scratch
    (`fresh_engine`: archive and engine without stored KV) gives."""
    fork, _ = run_chatdb("ask", "--json", "--fork-from", str(two["message_id"]),
                         "--model", str(model_path), *ARGS, FORK, db=db)
    assert fork["kv"]["source"] == "archive"
    assert fork["kv"]["restored_tokens"] == ends[0]   # the rest is computed
    archive, engine = fresh_engine
    conv = archive.create_conversation("again")
    for text, expected in ((LONG, one), (SECOND, two)):
        assert engine.reply(conv.id, text).text == expected["text"]
    assert engine.reply(conv.id, FORK).text == fork["text"]
