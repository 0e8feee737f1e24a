"""bench/serve.py's pieces run: its client against a real chatdb serve, and its bare loop.

Only that they work and report what they should; no timing is a pass or a fail.
"""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from bare_batch import BareBatch  # noqa: E402
from serve_clients import (chatdb_server, chatdb_threads, concurrent, stream_chat,  # noqa: E402
                           together_rate)

from engine.llama.model_path import resolve_model_path  # noqa: E402
from engine.machine.threads import ThreadTuner  # noqa: E402


@pytest.mark.timeout(600)
def test_client_streams_times_and_reads_usage(tmp_path):
    chat = [{"role": "user", "content": "Say hello."}]
    with chatdb_server(tmp_path / "bench.db", tmp_path, parallel=2, threads=1) as server:
        first = stream_chat(server.base, chat, 4)
        again = stream_chat(server.base, chat + [{"role": "assistant", "content": first.text},
                                                 {"role": "user", "content": "Again."}], 4)
        both = concurrent(server.base, [[{"role": "user", "content": f"Count to {n}."}]
                                        for n in (3, 5)], 4)
        threads = chatdb_threads(server.base)   # what the bare loop is then run on
    assert 1 <= first.tokens <= 4 and first.text
    assert 0 < first.ttft and first.first_at <= first.last_at
    assert first.cached == 0 and again.cached > 0   # the resend's path came from the archive
    assert len(both) == 2 and all(t.tokens >= 1 for t in both)
    assert together_rate(both) >= 0
    assert threads == (1, 1)   # CHATDB_THREADS=1, as /health reports it


@pytest.mark.timeout(300)
def test_bare_loop_runs_in_chatdbs_context_with_its_threads():
    bare = BareBatch(str(resolve_model_path(None)), 2, ThreadTuner(1))
    try:
        assert bare.model.config.n_seq_max == 2
        assert bare.threads() == (1, 1)
        assert bare.run(3) > 0
    finally:
        bare.close()
