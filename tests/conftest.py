"""Shared fixtures: real archive files in a temporary directory.

The whole suite runs under umask 000, and so do the processes it starts: a
file or directory that chatdb creates without choosing its mode would be
world-readable, and the tests that check modes would see it.
"""

import os

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
