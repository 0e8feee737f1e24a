"""Shared fixtures: real archive files in a temporary directory.

The whole suite runs under umask 000, and so do the processes it starts: a
file or directory that chatdb creates without choosing its mode would be
world-readable, and the tests that check modes would see it.
"""

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
