"""/search by meaning in the console: what a turn writes is embedded in the background."""

import io

import pytest

from cli.console import stdin_mode
from cli.meaning import MeaningSearch
from engine.llama.sampling import SamplingSettings

GREEDY = SamplingSettings(temperature=0, max_tokens=6, seed=1)


def run(session, script: str) -> "tuple[str, str, int]":
    out, err = io.StringIO(), io.StringIO()
    session.render.out, session.render.err = out, err
    session.quitting, session.errors = False, 0
    status = stdin_mode.run(session, io.StringIO(script))
    return out.getvalue(), err.getvalue(), status


@pytest.mark.timeout(600)
def test_turns_are_indexed_and_found_by_meaning(shared_model):
    session = shared_model.session()
    session.meaning = MeaningSearch(session.archive)
    out, err, status = run(session, "/search --by meaning sourdough\n")
    assert status == 1 and "chatdb index" in err
    out, err, status = run(session, "/search sourdough\n/search sourdough\n")
    assert status == 0 and err.count("no index by meaning") == 1  # said once
    session.indexer = session.meaning.background(session.render.warning)
    try:
        out, err, status = run(session, "How do I keep my sourdough starter alive?\n")
        assert status == 0, err
        assert session.indexer.flush(timeout=120)
        out, err, status = run(session, "/search --by meaning feeding a bread culture\n/open 1\n")
        assert status == 0, err
        assert "sourdough starter" in out.splitlines()[1]
        assert session.path()[-2].content.startswith("How do I keep my sourdough")
        out, err, status = run(session, "/search --by sideways x\n")
        assert status == 1 and "--by takes one of" in err
    finally:
        session.indexer.close()
        session.meaning.close()
