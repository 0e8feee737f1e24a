"""Running the real `chatdb` command in a subprocess, on a real archive file."""

import io
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..chatdb_command import DRAFT, chatdb_argv, python_path

REPO = Path(__file__).resolve().parents[2]
# A chatdb process that runs longer has hung. Generous: on a loaded 2-core
# machine one `ask` took over 60 s (11 s of it on the CPU); under the 900 s
# every test has.
PROCESS_TIMEOUT = 240


class SharedModel:
    """One archive file and one loaded model for a module's tests; each test takes a
    Session of its own on them (`session()`), so that what one test sets
    (conversation, /set, /search hits, the renderer) never reaches the next.
    A test that replaces or closes the engine (/model) needs a SharedModel of its own."""

    def __init__(self, db_path, sampling):
        from chatdb.archive import Archive
        from cli.console.model_loading import EngineOptions, load_engine

        self.sampling = sampling
        self.archive = Archive.open(db_path)
        self.options = EngineOptions(model=None, n_ctx=2048, use_kv=True, draft=DRAFT)
        self.engine, _ = load_engine(self._renderer(), self.archive, self.options, sampling)

    def session(self):
        from cli.console.session import Session

        self.engine.set_sampling(self.sampling)  # the engine owns them: what /set changed goes
        return Session(self.archive, self.engine, self._renderer(), self.options)

    def close(self) -> None:
        self.engine.close()
        self.archive.close()

    @staticmethod
    def _renderer():
        from cli.console.screen.render import Renderer

        return Renderer(out=io.StringIO(), err=io.StringIO(), color=False)


@pytest.fixture(scope="module")
def shared_model(request, tmp_path_factory):
    """A SharedModel for the module, sampling with its GREEDY settings."""
    name = request.module.__name__.rsplit(".", 1)[-1]
    model = SharedModel(tmp_path_factory.mktemp(name) / "chatdb.db", request.module.GREEDY)
    yield model
    model.close()


@pytest.fixture
def cli_env(tmp_path):
    """The environment of a user with no CHATDB_DB, no NO_COLOR, and private XDG dirs (the
    data and the console's input history: tests run side by side)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CHATDB_DB", "NO_COLOR")}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    env["XDG_STATE_HOME"] = str(tmp_path / "xdg-state")
    env["PYTHONPATH"] = python_path(env)
    return env


@dataclass
class Result:
    returncode: int
    stdout: "str | bytes"
    stderr: "str | bytes"

    def json(self):
        """The one JSON document a successful --json run printed."""
        assert self.returncode == 0, self.stderr
        assert self.stderr == ""
        return json.loads(self.stdout)

    def error(self, code: int = 1) -> str:
        """The single `chatdb: error: ...` line a failed run printed."""
        assert self.returncode == code, (self.stdout, self.stderr)
        lines = self.stderr.splitlines()
        assert len(lines) == 1, self.stderr
        assert lines[0].startswith("chatdb: error: ")
        assert "Traceback" not in self.stderr
        return lines[0]


class Chatdb:
    """chatdb(*args) runs `chatdb ARGS --db <db_path>`; db=False leaves --db out."""

    def __init__(self, db_path: Path, env: dict):
        self.db_path, self.env, self.cwd = db_path, env, REPO

    def argv(self, *args, db=True) -> list[str]:
        return chatdb_argv(*args) + (["--db", str(self.db_path)] if db else [])

    def __call__(self, *args, db=True, input=None, env=None) -> Result:
        done = subprocess.run(self.argv(*args, db=db), cwd=self.cwd, env={**self.env, **(env or {})},
                              input=input, capture_output=True,
                              text=not isinstance(input, bytes), timeout=PROCESS_TIMEOUT)
        return Result(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def chatdb(db_path, cli_env):
    return Chatdb(db_path, cli_env)


@dataclass
class Sample:
    rust: int        # conversation: system prompt, a question with two answers (branches)
    trip: int        # conversation with an interrupted answer
    fork: int        # forked from rust's first answer, then continued
    question: int    # message ids in rust
    first_answer: int
    second_answer: int


@pytest.fixture
def sample(archive):
    rust = archive.create_conversation("Rust questions", system_prompt="Be brief.", model="smol",
                                       created_at="2024-03-01T10:00:00.000Z")
    question = archive.add_message(rust.id, "user", "What is a lifetime?",
                                   created_at="2024-03-01T10:00:01.000Z")
    first = archive.add_message(rust.id, "assistant", "A lifetime is the scope a borrow lives in.",
                                created_at="2024-03-01T10:00:02.000Z")
    second = archive.add_message(rust.id, "assistant", "They name regions of code.",
                                 parent_id=question.id, created_at="2024-03-01T10:00:03.000Z")
    trip = archive.create_conversation("Trip to Kyoto", created_at="2024-04-02T09:00:00.000Z")
    archive.add_message(trip.id, "user", "Plan three days in Kyoto", created_at="2024-04-02T09:00:01.000Z")
    archive.add_message(trip.id, "assistant", "Day one: Fushimi Inari at dawn", status="interrupted",
                        created_at="2024-04-02T09:00:02.000Z")
    fork = archive.fork(first.id, title="Borrowing")
    archive.add_message(fork.id, "user", "And what does the borrow checker do?",
                        created_at="2024-05-03T08:00:00.000Z")
    return Sample(rust.id, trip.id, fork.id, question.id, first.id, second.id)


NODE_TIME = 1_700_000_000.0


def node(key, parent, children, role=None, text=None, *, t=0, content=None, **message_fields):
    """One ChatGPT mapping entry; role None makes the message-less root."""
    message = None
    if role is not None:
        message = {
            "id": key, "author": {"role": role, "name": None, "metadata": {}},
            "create_time": NODE_TIME + t, "update_time": None,
            "content": content or {"content_type": "text", "parts": [text]},
            "status": "finished_successfully", "end_turn": True, "weight": 1.0,
            "metadata": {}, "recipient": "all", **message_fields,
        }
    return key, {"id": key, "message": message, "parent": parent, "children": children}


@pytest.fixture
def chatgpt_export():
    """A realistic conversations.json: two conversations, the first with
    a regenerated answer, an edited question, tool calls and a hidden system node."""
    kyoto = dict([
        node("root", None, ["sys"]),
        node("sys", "root", ["u1"], "system", "", metadata={"is_visually_hidden_from_conversation": True}),
        node("u1", "sys", ["a1", "a1b"], "user", "Plan a three-day trip to Kyoto", t=10),
        node("a1", "u1", ["u3"], "assistant", "Day 1: Fushimi Inari", t=20,
             metadata={"model_slug": "gpt-4o"}),
        node("u3", "a1", [], "user", t=25, content={
            "content_type": "multimodal_text",
            "parts": [{"content_type": "image_asset_pointer", "asset_pointer": "file-service://x"},
                      "Which temple is this?"]}),
        node("a1b", "u1", ["u2", "u2e"], "assistant", "Day 1: Kinkaku-ji, the Golden Pavilion", t=30,
             metadata={"model_slug": "gpt-4o"}),
        node("u2", "a1b", ["a2"], "user", "Add food tips", t=40),
        node("a2", "u2", [], "assistant", "Try yudofu near Nanzen-ji", t=50),
        node("u2e", "a1b", ["call"], "user", "Add food tips for vegetarians", t=60),
        node("call", "u2e", ["out"], "assistant", t=70, recipient="browser",
             content={"content_type": "code", "language": "unknown",
                      "text": "search('vegetarian kyoto')"}),
        node("out", "call", ["a3"], "tool", t=80,
             content={"content_type": "tether_browsing_display", "result": "...", "summary": None}),
        node("a3", "out", [], "assistant", "Shigetsu at Tenryu-ji serves shojin ryori", t=90,
             status="finished_partial_completion"),
    ])
    haiku = dict(reversed([  # children listed before parents, as files may
        node("h0", None, ["h1"]),
        node("h1", "h0", ["h2"], "user", "Write a haiku about SQLite", t=1000),
        node("h2", "h1", [], "assistant", "One file holds it all\nrows rest in a quiet page\n"
                                          "the journal remembers", t=1001),
    ]))
    return [
        {"title": "Kyoto trip", "create_time": NODE_TIME, "update_time": NODE_TIME + 95,
         "mapping": kyoto, "current_node": "a3", "id": "conv-kyoto",
         "default_model_slug": "gpt-4o", "moderation_results": [], "is_archived": False},
        {"title": "SQLite haiku", "create_time": NODE_TIME + 999, "update_time": NODE_TIME + 1002,
         "mapping": haiku, "current_node": "h2", "conversation_id": "conv-haiku"},
    ]
