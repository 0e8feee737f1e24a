"""Engine fixtures: the real default model on real archive files."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from chatdb.archive import Archive
from engine.chat import Engine
from engine.llama.model_path import resolve_model_path
from engine.llama.sampling import SamplingSettings

from ..chatdb_command import DRAFT, chatdb_argv, python_path

ROOT = Path(__file__).resolve().parents[2]
GREEDY = SamplingSettings(temperature=0, max_tokens=24, seed=1)


class StopAfter:
    """A `cancelled` that turns true after `n` questions (llama.cpp asks once per graph node)."""

    def __init__(self, n: int):
        self.n, self.asked = n, 0

    def __call__(self) -> bool:
        self.asked += 1
        return self.asked > self.n


@pytest.fixture(scope="session")
def model_path():
    return resolve_model_path()


@pytest.fixture
def open_engine(db_path):
    """open_engine(**kw) -> (archive, engine); closed at the end of the test."""
    opened = []

    def factory(path=None, **kw):
        archive = Archive.open(path or db_path)
        kw.setdefault("sampling", GREEDY)
        kw.setdefault("draft", DRAFT)
        engine = Engine.open(archive, **kw)
        opened.append((archive, engine))
        return archive, engine

    yield factory
    for archive, engine in reversed(opened):
        engine.close()
        archive.close()


def run_chatdb(*args, db, check=True, input=None, timeout=300):
    """Run the real `chatdb` command in a new process; parsed JSON if --json."""
    env = {**os.environ, "PYTHONPATH": python_path()}
    proc = subprocess.run(chatdb_argv("--db", db, *args),
                          capture_output=True, text=True, env=env, cwd=ROOT, input=input,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"chatdb {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    if "--json" in args and proc.returncode == 0:
        return json.loads(proc.stdout), proc
    return None, proc


def restored_from_archive(engine, archive, message_id: int) -> bytes:
    """The state the engine rebuilds from the archive alone for the path to `message_id`."""
    engine.cache.reset()
    engine.cache.memory.entries.clear()
    engine.cache.warm(engine.prompts.path_tokens(archive.path(message_id)), archive, print)
    assert engine.cache.ahead[0] == "archive"
    return bytes(engine.model.get_state())


def assert_refused(proc, word: str) -> None:
    """The command failed with one line, `chatdb: error: ...`, that says `word`."""
    assert proc.returncode == 1
    assert proc.stderr.startswith("chatdb: error: ") and proc.stderr.count("\n") == 1
    assert word in proc.stderr
