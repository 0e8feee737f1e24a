"""Shared fixtures: real archive files in a temporary directory.

The whole suite runs under umask 000, and so do the processes it starts: a
file or directory that chatdb creates without choosing its mode would be
world-readable, and the tests that check modes would see it.
"""

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from chatdb.archive import Archive


os.umask(0o000)


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "chatdb.db"


@pytest.fixture
def archive(db_path):
    with Archive.open(db_path) as archive:
        yield archive


GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"


@pytest.fixture(scope="session")
def gemma_path():
    """The second test model (sliding-window attention), assembled by `make test-models`.

    Not skipped when missing: the suite is meant to run with it.
    """
    path = Path(os.environ.get("CHATDB_TEST_GEMMA")
                or Path(sys.prefix) / "share" / "chatdb" / "models" / GEMMA_FILE)
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `make test-models` (the test set-up assembles it)",
                    pytrace=False)
    return path


HYBRID_FILE = "tiny-hybrid-lfm2.gguf"


@pytest.fixture(scope="session")
def hybrid_path(tmp_path_factory):
    """A tiny hybrid model (LFM2 layout, random weights, SmolLM2's tokenizer): the one
    `make test-models` wrote, else written here (tests/assets/tiny_hybrid.py, fixed seed)."""
    built = Path(sys.prefix) / "share" / "chatdb" / "models" / HYBRID_FILE
    if built.is_file():
        return built
    from engine.model_path import resolve_model_path
    spec = importlib.util.spec_from_file_location(
        "tiny_hybrid", Path(__file__).parent / "assets" / "tiny_hybrid.py")
    tiny_hybrid = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tiny_hybrid)
    return tiny_hybrid.write(tmp_path_factory.mktemp("models") / HYBRID_FILE, resolve_model_path())
