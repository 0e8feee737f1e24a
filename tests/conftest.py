"""Shared fixtures: real archive files in a temporary directory.

The whole suite runs under umask 000, and so do the processes it starts: a
file or directory that chatdb creates without choosing its mode would be
world-readable, and the tests that check modes would see it.
"""

import importlib.util
import os
import signal
import sys
from pathlib import Path

import pytest

from chatdb.archive import Archive

from .properties import profiles

# Before Hypothesis's plugin reads --hypothesis-profile, which may name one of them.
profiles.register()


os.umask(0o000)

# The GPU suite runs on a GPU build, by `make test-gpu` (pytest tests/gpu), not with the rest.
collect_ignore = ["gpu"]

# Ctrl-C as at a terminal, for the suite and the processes it starts: a suite started in
# the background by a script (`pytest ... &`) inherits SIGINT ignored, and so would every
# chatdb it starts, and the tests that send one SIGINT would see it ignored.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The suite starts several hundred chatdb processes on this checkout. Where the environment
# says not to write bytecode (PYTHONDONTWRITEBYTECODE), each would compile some 200 modules
# again at its start (a tenth of a second or more on a small machine): they cache it, as
# Python does by default (into __pycache__, which git ignores).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


# -- the two passes of `make test` ----------------------------------------------------------

def pytest_addoption(parser):
    parser.addoption(
        "--alone", choices=("with", "skip", "only"), default="with",
        help="tests marked `alone` (they need a quiet machine): run them with the rest "
             "(default), leave them out (make test's parallel pass) or run only them (its "
             "serial pass)")


# On workers, the heaviest parts' files go first: with --no-loadscope-reorder (make test) xdist
# hands out whole files in this order (by default it orders them by their number of tests,
# which sends the one-test files of a minute, a server's or a model's, last), so a worker free
# near the end takes a short file.
HEAVIEST_FIRST = ("engine", "server", "cli", "embed", "chatdb")


def _part(item) -> int:
    parts = Path(str(item.fspath)).relative_to(Path(__file__).parent).parts
    return HEAVIEST_FIRST.index(parts[0]) if parts[0] in HEAVIEST_FIRST else len(HEAVIEST_FIRST)


def pytest_collection_modifyitems(config, items):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=_part)   # stable: a file's tests keep their order
    mode = config.getoption("--alone")
    if mode == "with":
        return
    keep, leave = [], []
    for item in items:
        alone = item.get_closest_marker("alone") is not None
        (keep if alone == (mode == "only") else leave).append(item)
    if leave:
        config.hook.pytest_deselected(items=leave)
    items[:] = keep


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "chatdb.db"


@pytest.fixture
def archive(db_path):
    with Archive.open(db_path) as archive:
        yield archive


@pytest.fixture
def pinned_draft_costs(monkeypatch):
    """The draft policy on the built-in cost prior, in this process and those it starts (before
    cli_env or a server copies the environment): a test that asserts how much was drafted
    then says what the drafter and policy do, not what a crowded machine timed (the
    suite's two workers share two cores). Measuring and learning costs have tests of their own."""
    from engine.machine.tuning import ENV
    monkeypatch.setenv(ENV, "prior")


@pytest.fixture(scope="session")
def smollm2_vocab():
    """The default model loaded once per worker with a small context, for the tests that need
    its vocabulary or tokenizer only (never its KV: a test that decodes loads its own)."""
    from engine.llama.model import ContextConfig, Model
    from engine.llama.model_path import resolve_model_path

    model = Model(str(resolve_model_path()), ContextConfig(n_ctx=256, n_batch=32, n_threads=1,
                                                          flash_attn=False))
    yield model
    model.close()


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


HYBRID_FILE = "tiny-hybrid-lfm2.gguf"
MAMBA_FILE = "tiny-mamba.gguf"
TOOLS_FILE = "tiny-tools-qwen-template.gguf"


def _tiny_model(tmp_path_factory, script: str, name: str) -> Path:
    """A tiny random-weight model with SmolLM2's tokenizer: the one `make test-models`
    wrote, else written here by tests/assets/`script` (fixed seed)."""
    built = Path(sys.prefix) / "share" / "chatdb" / "models" / name
    if built.is_file():
        return built
    from engine.llama.model_path import resolve_model_path
    spec = importlib.util.spec_from_file_location(script, Path(__file__).parent / "assets" / f"{script}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.write(tmp_path_factory.mktemp("models") / name, resolve_model_path())


@pytest.fixture(scope="session")
def hybrid_path(tmp_path_factory):
    """A tiny hybrid model (LFM2 layout: short-conv recurrent and attention layers)."""
    return _tiny_model(tmp_path_factory, "tiny_hybrid", HYBRID_FILE)


@pytest.fixture(scope="session")
def mamba_path(tmp_path_factory):
    """A tiny purely recurrent model (Mamba)."""
    return _tiny_model(tmp_path_factory, "tiny_mamba", MAMBA_FILE)


@pytest.fixture(scope="session")
def tools_model_path(tmp_path_factory):
    """A tiny llama-architecture model carrying Qwen2.5's chat template (tool support)."""
    return _tiny_model(tmp_path_factory, "tiny_tools", TOOLS_FILE)


# -- search by meaning -------------------------------------------------------------------

@pytest.fixture(scope="session")
def embed_path():
    """The default embedding model, converted by the set-up (`make install`)."""
    from engine.embed.model_path import default_embed_path

    path = default_embed_path()
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `make install` (it converts the embedding model)",
                    pytrace=False)
    return path


@pytest.fixture(scope="session")
def embedder(embed_path):
    """The default embedding model loaded once for the whole suite (fingerprint unremembered)."""
    from engine.embed.embedder import Embedder

    loaded = Embedder.open(None, str(embed_path))
    yield loaded
    loaded.close()


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory):
    """(the folder of a tiny random-weight sentence-transformers BERT, its GGUF conversion)."""
    from engine.embed.convert import convert

    spec = importlib.util.spec_from_file_location("tiny_bert", Path(__file__).parent / "assets" / "tiny_bert.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    root = tmp_path_factory.mktemp("tiny-bert")
    folder = module.write(root / "model")
    return folder, convert(folder, root / "tiny-bert.gguf", "f32")
