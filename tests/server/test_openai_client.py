"""The official `openai` package and `llm` against a real `chatdb serve`."""

import os
import subprocess
import sys

import openai

from ..chatdb_command import python_path
from .conftest import chatdb_json


MESSAGES = [{"role": "system", "content": "You are brief."},
            {"role": "user", "content": "Name a colour."}]


def client(server, **kw) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base, api_key=kw.pop("api_key", "unused"), max_retries=0,
                         timeout=600, **kw)


def test_openai_stream_and_not_give_the_same_greedy_answer(start_server, db_path):
    server = start_server()
    api = client(server)
    whole = api.chat.completions.create(model="whatever", messages=MESSAGES, temperature=0,
                                        max_tokens=24)
    answer = whole.choices[0].message.content
    assert answer and whole.choices[0].finish_reason in ("stop", "length")
    assert whole.usage.prompt_tokens > 0 and 0 < whole.usage.completion_tokens <= 24
    assert whole.model == [m.id for m in api.models.list().data][0]

    chunks = list(api.chat.completions.create(model="gpt-4o", messages=MESSAGES, temperature=0,
                                              max_tokens=24, stream=True,
                                              stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == answer
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == whole.choices[0].finish_reason
    usage = chunks[-1].usage
    assert usage.completion_tokens == whole.usage.completion_tokens
    # The resent question's KV was already there: only the answer's opening is computed.
    assert usage.prompt_tokens_details.cached_tokens >= usage.prompt_tokens - 4

    word = answer.split()[min(2, len(answer.split()) - 1)]
    cut = api.chat.completions.create(model="x", messages=MESSAGES, temperature=0, max_tokens=24,
                                      stop=[word])
    assert cut.choices[0].message.content == answer[:answer.find(word)]
    assert cut.choices[0].finish_reason == "stop"

    convs = chatdb_json(db_path, "list")
    assert len(convs) == 1, "a resend continues the same conversation"
    shown = chatdb_json(db_path, "show", convs[0]["id"], "--all")
    assert [m["role"] for m in shown["messages"]] == ["system", "user"] + ["assistant"] * 3
    assert shown["messages"][-1]["content"] == answer[:answer.find(word)]
    assert shown["meta"]["client"].startswith("OpenAI/Python")


def test_user_field_names_the_client(start_server, db_path):
    server = start_server()
    client(server).chat.completions.create(model="x", messages=[{"role": "user", "content": "Hi"}],
                                           temperature=0, max_tokens=4, user="editor-plugin")
    (conv,) = chatdb_json(db_path, "list")
    assert chatdb_json(db_path, "show", conv["id"])["meta"]["client"] == "editor-plugin"


def test_llm_with_an_openai_compatible_model(start_server, db_path, tmp_path):
    server = start_server()
    home = tmp_path / "llm"
    home.mkdir()
    (home / "extra-openai-models.yaml").write_text(
        f"- model_id: chatdb\n  model_name: local\n  api_base: \"{server.base}\"\n"
        f"  api_key_name: chatdb\n  can_stream: true\n")
    env = {**os.environ, "LLM_USER_PATH": str(home), "PYTHONPATH": python_path()}
    llm = [sys.executable, "-m", "llm"]
    subprocess.run(llm + ["keys", "set", "chatdb", "--value", "unused"], env=env, check=True,
                   capture_output=True, timeout=240)
    done = subprocess.run(llm + ["-m", "chatdb", "-o", "temperature", "0", "-o", "max_tokens", "16",
                                 "Name a fruit."], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    (conv,) = chatdb_json(db_path, "list")
    shown = chatdb_json(db_path, "show", conv["id"])
    assert [m["content"] for m in shown["messages"] if m["role"] == "user"] == ["Name a fruit."]
    assert shown["messages"][-1]["content"].strip() == done.stdout.strip()
