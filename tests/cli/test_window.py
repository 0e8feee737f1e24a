"""A chat longer than the context, as each front-end shows it: the console's dim line and
/history, and `ask --json`'s window (the server's is in tests/server/test_organising.py).
The real command, the default model, a 512-token context."""

import json

from chatdb.archive import Archive

CTX = ("--ctx", "512")
SAMPLING = ("--temperature", "0", "--seed", "1", "--max-tokens", "8")
TEXT = ("The keepers of the northern lighthouse wrote down every ship, storm and tide "
        "in a log that is now kept in the town library. ")
TURNS = 12   # about twice the context


def long_chat(db) -> tuple[int, list[int]]:
    """(the conversation, its message ids after the system prompt)."""
    with Archive.open(db) as archive:
        conv = archive.create_conversation("long", system_prompt="You are brief.")
        for i in range(TURNS):
            archive.add_message(conv.id, "user", f"Note {i}: " + TEXT * 2)
            archive.add_message(conv.id, "assistant", f"Noted {i}. " + TEXT)
        return conv.id, [m.id for m in archive.messages(conv.id)[1:]]


def test_ask_json_names_the_first_message_in_context(chatdb, db_path):
    conv, ids = long_chat(db_path)
    done = chatdb("ask", "--json", "--conv", conv, *SAMPLING, *CTX, "Which note came last?")
    assert done.returncode == 0 and "messages after the system prompt are left out" in done.stderr
    asked = json.loads(done.stdout)
    window = asked["window"]
    assert window["left_out_messages"] == asked["left_out_messages"] > 0
    assert window["first_message_id"] == ids[window["left_out_messages"]]   # the first one kept
    short = chatdb("ask", "--json", *SAMPLING, *CTX, "Hello").json()
    assert short["window"]["left_out_messages"] == 0
    assert short["window"]["first_message_id"] == short["user_message_id"]


def test_the_console_says_which_messages_the_model_sees_and_history_marks_the_rest(chatdb, db_path):
    conv, ids = long_chat(db_path)
    done = chatdb(*SAMPLING, *CTX, "chat", conv, input="Which note came last?\n/history\n")
    assert done.returncode == 0, done.stderr
    line = next(l for l in done.stderr.splitlines() if "window: messages" in l)
    total = len(ids) + 2                                   # the question and its answer
    shown = line.split("window: messages ")[1].split(" ")[0]
    first, last = map(int, shown.split("-"))
    assert last == total and 1 < first < total and f"of {total}" in line
    assert f"messages 1-{first - 1} are no longer in the model's context" in done.stderr
    # Each message before the window is marked; none from it on.
    marked = [l for l in done.stdout.splitlines() if "no longer seen by the model" in l]
    assert len(marked) == first - 1
    assert marked[0].startswith("[1] ") and marked[-1].startswith(f"[{first - 1}] ")
    with Archive.open(db_path) as archive:
        assert archive.messages(conv)[-2].content == "Which note came last?"


def test_history_marks_an_old_chat_before_any_answer_as_the_next_answer_sees_it(chatdb, db_path):
    """Opened again, no answer yet in this session: /history already marks what the model
    no longer sees, and /retry (the same question answered again) has just that window."""
    conv, _ = long_chat(db_path)
    done = chatdb(*SAMPLING, *CTX, "chat", conv, input="/history\n/retry\n")
    assert done.returncode == 0, done.stderr
    history = done.stdout.split("[1] ", 1)[1]             # before /retry's answer is shown
    marked = [l for l in ("[1] " + history).splitlines() if "no longer seen by the model" in l]
    assert marked and marked[0].startswith("[1] ")
    unseen = len(marked)
    assert f"messages 1-{unseen} are no longer in the model's context" in done.stderr
    retried = next(l for l in done.stderr.splitlines() if "window: messages" in l)
    assert retried.split("window: messages ")[1].startswith(f"{unseen + 1}-")
