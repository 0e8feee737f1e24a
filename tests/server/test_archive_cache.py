"""The archive is the cache: resends add only new messages, edits branch, KV survives restarts."""

from chatdb.archive import Archive

from .conftest import chatdb_json

SYSTEM = {"role": "system", "content": "You answer in one short sentence."}


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


def test_resending_a_conversation_adds_only_its_new_messages(start_server, db_path):
    server = start_server()
    first = server.chat([SYSTEM, user("What is tea?")])
    a1 = first["choices"][0]["message"]["content"]
    conv = first["chatdb"]["conversation_id"]
    with Archive.open(db_path) as archive:
        before = archive.count_messages()
    second = server.chat([SYSTEM, user("What is tea?"), assistant(a1), user("And coffee?")])
    assert second["chatdb"]["conversation_id"] == conv
    assert second["chatdb"]["reused_messages"] == 3 and second["chatdb"]["added_messages"] == 1
    with Archive.open(db_path) as archive:
        assert archive.count_messages() == before + 2   # the new question and its answer
        path = archive.messages(conv)
    assert [(m.role, m.content) for m in path] == [
        ("system", SYSTEM["content"]), ("user", "What is tea?"), ("assistant", a1),
        ("user", "And coffee?"), ("assistant", second["choices"][0]["message"]["content"])]
    # The prompt's KV up to the new question was in the context already.
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] > first["usage"]["prompt_tokens"]


def test_a_changed_earlier_message_branches_there(start_server, db_path):
    server = start_server()
    first = server.chat([SYSTEM, user("What is tea?")])
    a1 = first["choices"][0]["message"]["content"]
    server.chat([SYSTEM, user("What is tea?"), assistant(a1), user("And coffee?")])
    edited = server.chat([SYSTEM, user("What is tea?"), assistant(a1), user("And cocoa?")])
    assert edited["chatdb"]["conversation_id"] == first["chatdb"]["conversation_id"]
    assert edited["chatdb"]["reused_messages"] == 3
    with Archive.open(db_path) as archive:
        answer = archive.message(first["chatdb"]["message_id"])
        questions = [r[0] for r in archive.conn.execute(
            "SELECT content FROM messages WHERE parent_id = ? ORDER BY id", (answer.id,))]
        head = archive.messages(first["chatdb"]["conversation_id"])
    assert questions == ["And coffee?", "And cocoa?"]      # siblings under the same answer
    assert head[-2].content == "And cocoa?"                # the head moved to the new branch
    # A different first question shares nothing: a conversation of its own.
    other = server.chat([SYSTEM, user("What is milk?")])
    assert other["chatdb"]["conversation_id"] != first["chatdb"]["conversation_id"]
    assert len(chatdb_json(db_path, "list")) == 2


def test_after_a_restart_the_kv_comes_from_the_archive(start_server, db_path):
    server = start_server()
    story = [SYSTEM, user("Tell me about the history of tea in China, India and England.")]
    first = server.chat(story, max_tokens=64)
    assert first["chatdb"]["kv_source"] == "none"
    assert server.stop() == 0                                  # SIGTERM: KV stored before exit
    again = start_server()
    story += [assistant(first["choices"][0]["message"]["content"]), user("Thanks!")]
    second = again.chat(story)
    stored = first["usage"]["prompt_tokens"] + first["usage"]["completion_tokens"]
    assert second["chatdb"]["kv_source"] == "archive"
    assert second["chatdb"]["restored_tokens"] >= stored - 2
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] == second["chatdb"]["restored_tokens"]
    assert second["chatdb"]["computed_tokens"] == second["usage"]["prompt_tokens"] - second["chatdb"]["restored_tokens"]
    assert second["chatdb"]["computed_tokens"] < 20             # the new question only


def test_the_console_continues_a_served_conversation(start_server, db_path):
    server = start_server()
    first = server.chat([user("Say yes.")])
    conv = first["chatdb"]["conversation_id"]
    server.stop()
    reply = chatdb_json(db_path, "ask", "--conv", conv, "--temperature", "0", "--max-tokens", "8",
                        "Again.")
    assert reply["conversation_id"] == conv
    shown = chatdb_json(db_path, "show", conv)
    assert [m["content"] for m in shown["messages"] if m["role"] == "user"] == ["Say yes.", "Again."]
