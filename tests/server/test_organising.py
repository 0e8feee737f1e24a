"""chatdb serve and the archive's order: `chatdb.tags` on a request tags the conversation it
lands in (a real server, real HTTP, read back with `chatdb list --json`)."""

import json

import pytest

from .conftest import Server, chatdb_json


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    served = Server(tmp_path_factory.mktemp("organising") / "chatdb.db", "--ctx", "512")
    yield served
    served.stop()


def test_chatdb_tags_tag_the_conversation_a_request_lands_in(server):
    first = [{"role": "user", "content": "Name a colour."}]
    answer = server.chat(first, max_tokens=4, chatdb={"tags": ["Colours", "quiz night"]})
    conv_id = answer["chatdb"]["conversation_id"]
    listed = {row["id"]: row for row in chatdb_json(server.db, "list")}
    assert listed[conv_id]["tags"] == ["Colours", "quiz night"]
    follow = first + [{"role": "assistant", "content": answer["choices"][0]["message"]["content"]},
                      {"role": "user", "content": "Another one."}]
    again = server.chat(follow, max_tokens=4, chatdb={"tags": ["colours", "second"]})
    assert again["chatdb"]["conversation_id"] == conv_id       # the same conversation, continued
    listed = {row["id"]: row for row in chatdb_json(server.db, "list", "--tag", "COLOURS")}
    assert listed[conv_id]["tags"] == ["Colours", "quiz night", "second"]


@pytest.mark.parametrize("extension, param", [
    ({"tags": ["x" * 10_000]}, "chatdb.tags[0]"),
    ({"tags": ["bad\nline"]}, "chatdb.tags[0]"),
    ({"tags": "one"}, "chatdb.tags"),
    ({"colour": "red"}, "chatdb.colour"),
    ("tags", "chatdb"),
])
def test_bad_tags_are_a_400_naming_the_field_and_nothing_is_stored(server, extension, param):
    before = len(chatdb_json(server.db, "list"))
    response = server.post("/v1/chat/completions", {
        "model": "any", "messages": [{"role": "user", "content": "Unstored question"}],
        "max_tokens": 2, "chatdb": extension})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param
    assert len(chatdb_json(server.db, "list")) == before


TEXT = ("The keepers of the northern lighthouse wrote down every ship, storm and tide "
        "in a log that is now kept in the town library. ")


def test_each_answer_says_which_messages_were_in_its_window(server):
    short = server.chat([{"role": "user", "content": "Say hi."}], max_tokens=2)
    assert short["chatdb"]["window"] == {"first_message_id": short["chatdb"]["message_id"] - 1,
                                         "left_out_messages": 0}
    messages = [{"role": "system", "content": "You are brief."}]
    for i in range(12):      # about twice the 512-token context
        messages += [{"role": "user", "content": f"Note {i}: " + TEXT * 2},
                     {"role": "assistant", "content": f"Noted {i}. " + TEXT}]
    messages.append({"role": "user", "content": "Which note came last?"})
    long = server.chat(messages, max_tokens=2)
    window = long["chatdb"]["window"]
    assert window["left_out_messages"] > 0
    shown = chatdb_json(server.db, "show", long["chatdb"]["conversation_id"])
    after_system = [m for m in shown["messages"] if m["role"] != "system"]
    first = after_system[window["left_out_messages"]]
    assert first["id"] == window["first_message_id"] and first["role"] == "user"
    streamed = server.post("/v1/chat/completions", {
        "model": "any", "messages": messages, "max_tokens": 2, "temperature": 0, "stream": True,
        "stream_options": {"include_usage": True}})
    last = [line for line in streamed.text.splitlines() if line.startswith("data: {")][-1]
    assert json.loads(last[len("data: "):])["chatdb"]["window"] == window


def test_an_answer_to_a_system_prompt_alone_has_no_first_message_in_its_window(server):
    """Found by the API's fuzzing: a request of one system message was a 500 (the window's
    first message after the system prompt looked up in an empty list)."""
    answer = server.chat([{"role": "system", "content": "Answer in one word."}], max_tokens=4)
    assert answer["chatdb"]["window"] == {"first_message_id": None, "left_out_messages": 0}
