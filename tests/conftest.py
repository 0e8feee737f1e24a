"""Shared fixtures: real archive files in a temporary directory."""

import pytest

from chatdb.archive import Archive


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "chatdb.db"


@pytest.fixture
def archive(db_path):
    with Archive.open(db_path) as archive:
        yield archive
