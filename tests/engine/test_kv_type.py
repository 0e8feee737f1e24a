"""q8_0 KV: its own fingerprint, the archive's setting, and a resume that still equals recomputing."""

import sqlite3

import llama_cpp
import pytest

from chatdb.archive import Archive
from engine.errors import EngineError
from engine.kv.kv_type import ENV, KV_TYPES, chosen

from .conftest import GREEDY

FIRST = "Name three colours of the rainbow."
SECOND = "Now name two more."


def test_the_command_line_names_the_kv_types_without_loading_llama_cpp():
    """--kv-type offers the engine's own names (one table), read before llama.cpp loads."""
    import subprocess
    import sys

    from ..chatdb_command import REPO, python_path

    code = ("import sys; from cli.model_options import add_kv_type_option; "
            "assert 'llama_cpp' not in sys.modules; import argparse; p = argparse.ArgumentParser(); "
            "add_kv_type_option(p); print(p._actions[-1].choices)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          env={"PYTHONPATH": python_path()}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(list(KV_TYPES))


def test_the_type_comes_from_the_option_the_environment_or_the_archive(archive, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert chosen(None, archive).name == "f16"
    with archive.transaction():
        archive.settings.put("kv_type", "q8_0")
    assert chosen(None, archive).name == "q8_0"
    monkeypatch.setenv(ENV, "f16")
    assert chosen(None, archive).name == "f16"
    assert chosen("q8_0", archive).name == "q8_0"
    monkeypatch.setenv(ENV, "q4")
    with pytest.raises(EngineError, match="f16 or q8_0"):
        chosen(None, archive)


def test_q8_0_kv_has_its_own_fingerprint_and_resumes_as_a_recomputation(open_engine, tmp_path):
    archive, engine = open_engine(kv_type="q8_0", n_ctx=2048)
    config = engine.model.config
    assert (config.type_k, config.type_v, config.flash_attn) == (
        llama_cpp.GGML_TYPE_Q8_0, llama_cpp.GGML_TYPE_Q8_0, True)   # a quantized V needs it
    assert engine.kv_mode == "rows" and engine.describe()["kv"]["type"] == "q8_0"
    conv = archive.create_conversation("q8")
    engine.reply(conv.id, FIRST)
    engine.flush()
    segment = archive.conn.execute("SELECT length(data), n_tokens FROM kv_segments").fetchone()
    with sqlite3.connect(tmp_path / "recompute.db") as copy:
        archive.conn.backup(copy)

    # Another engine on the archive (as a new process): restored under its own fingerprint.
    _, resumed = open_engine(kv_type="q8_0", n_ctx=2048)
    assert resumed.fingerprint == engine.fingerprint
    second = resumed.reply(conv.id, SECOND)
    assert second.kv_source == "archive" and second.restored_tokens > 0
    _, recomputing = open_engine(tmp_path / "recompute.db", kv_type="q8_0", n_ctx=2048, use_kv=False)
    assert recomputing.reply(conv.id, SECOND).text == second.text

    # f16 is another fingerprint: never restored from q8_0 rows, which are about half the bytes.
    _, f16 = open_engine(kv_type="f16", n_ctx=2048)
    assert f16.fingerprint != engine.fingerprint
    assert f16.layout.row_bytes_per_token * segment[1] > 1.8 * engine.layout.row_bytes_per_token * segment[1]
    other = f16.reply(conv.id, "And one more?")
    assert other.kv_source != "archive"
    assert any("another model or configuration" in w for w in other.warnings)
    assert segment[0] < 0.65 * f16.layout.row_bytes_per_token * segment[1]
