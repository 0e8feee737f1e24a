"""A chat longer than the context: its window's KV is reused live and from the archive, exactly."""

import shutil

from chatdb.archive import Archive

from .conftest import GREEDY, run_chatdb

CTX = ("--ctx", "512")   # the smallest context chatdb runs: the fewest tokens to read
ASK = ("--temperature", "0", "--seed", "1", "--max-tokens", "16", *CTX)
TEXT = ("The keepers of the northern lighthouse wrote down every ship, storm and tide "
        "in a log that is now kept in the town library. ")


def _long_chat(db, turns: int = 12) -> int:
    """A conversation of about twice a 512-token context, no KV stored."""
    with Archive.open(db) as archive:
        conv = archive.create_conversation("long", system_prompt="You are brief.")
        for i in range(turns):
            archive.add_message(conv.id, "user", f"Note {i}: " + TEXT * 2)
            archive.add_message(conv.id, "assistant", f"Noted {i}. " + TEXT)
        return conv.id


def test_in_one_process_each_turn_computes_only_its_new_messages(open_engine, db_path):
    conv = _long_chat(db_path)
    archive, engine = open_engine(n_ctx=512, sampling=GREEDY)
    first = engine.reply(conv, "Which note came last?")
    assert first.left_out_messages > 0
    second = engine.reply(conv, "And the one before?")
    assert second.left_out_messages == first.left_out_messages        # the same window
    assert second.kv_source == "live" and second.restored_tokens >= first.prompt_tokens
    assert second.computed_tokens < 40                                 # its question and framing
    # Asked afterwards, the engine names the window each answer had, and the next one's.
    assert engine.window_of(first.message_id) == (first.left_out_messages, first.window_first)
    assert engine.window_of(second.user_message_id) == (second.left_out_messages,
                                                        second.window_first)
    opening = archive.path(second.message_id)[1].id                    # "Note 0", all of it seen
    assert engine.window_of(opening) == (0, opening)


def test_after_a_restart_the_window_is_restored_and_answers_as_recomputed(tmp_path):
    db = tmp_path / "long.db"
    _long_chat(db)
    first, _ = run_chatdb("ask", "--json", "-c", *ASK, "Which note came last?", db=db)
    assert first["left_out_messages"] > 0
    assert first["kv"]["restored_tokens"] < 100                 # the window was read once
    clean = tmp_path / "clean.db"
    shutil.copy(db, clean)
    second, _ = run_chatdb("ask", "--json", "-c", *ASK, "And the one before?", db=db)
    assert second["left_out_messages"] == first["left_out_messages"]
    assert second["kv"]["source"] == "archive"
    assert second["kv"]["restored_tokens"] >= first["usage"]["prompt_tokens"]
    assert second["kv"]["computed_tokens"] < 40                 # the question and its framing
    recomputed, _ = run_chatdb("ask", "--json", "-c", "--no-kv", *ASK, "And the one before?",
                               db=clean)
    assert recomputed["left_out_messages"] == second["left_out_messages"]
    assert recomputed["kv"]["restored_tokens"] == 0
    assert second["text"] == recomputed["text"]
