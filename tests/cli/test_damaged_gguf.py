"""A file with the GGUF magic and a damaged or crafted header: one line, in every door that loads a model."""

import random
import struct

import pytest


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def _header(n_tensors: int, keys: bytes, n_kv: int) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv) + keys


ARCH = _string("general.architecture") + struct.pack("<I", 8) + _string("llama")
FILES = {
    "garbage": b"GGUF" + random.Random(1).randbytes(4096),
    "a string of 2**62 bytes": _header(1, struct.pack("<Q", 2**62) + b"x" * 100, 1),
    "an array of 2**40 floats": _header(0, ARCH + _string("tokenizer.ggml.scores")
                                        + struct.pack("<IIQ", 9, 6, 2**40), 2) + bytes(64),
    "2**40 layers": _header(0, ARCH + _string("llama.block_count")
                            + struct.pack("<IQ", 10, 2**40), 2) + bytes(64),
}


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gguf")
    for n, data in enumerate(FILES.values()):
        (folder / f"{n}.gguf").write_bytes(data)
    return [folder / f"{n}.gguf" for n in range(len(FILES))]


@pytest.mark.parametrize("command, which", [(("ask", "--max-tokens", "1", "hi"), 0),
                                            (("doctor",), 1), (("serve", "--port", "0"), 2)])
def test_each_command(chatdb, damaged, command, which):
    """One file each (the console below is given them all)."""
    path = damaged[which]
    line = chatdb(*command, "--model", path).error(1)
    assert str(path) in line and "GGUF header is damaged" in line


def test_the_console_model_command(chatdb, damaged):
    script = "".join(f"/model {path}\n" for path in damaged) + "/model\n"
    result = chatdb("--max-tokens", "1", input=script)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == len(damaged) and all("GGUF header is damaged" in e for e in errors)
    assert "SmolLM2" in result.stdout + result.stderr.split(errors[-1])[-1]   # still loaded
