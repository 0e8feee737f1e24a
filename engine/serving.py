"""Opening the engine with several sequences: for a server's turns, or to warm conversations."""

from contextlib import contextmanager
from pathlib import Path

from chatdb.archive import Archive

from .batching.request_loop import RequestLoop
from .batching.warming import Warmer
from .chat import Engine
from .decode.modes import DraftMode
from .llama.model_path import resolve_model_path
from .machine import hardware

MOST_ON_CPU, MOST_ON_GPU = 8, 16


def default_parallel() -> int:
    """Sequences per batch. On a CPU, batching buys little past two sequences per core
    (the bare batched loop on 2 cores: 1.05x at 2, 1.44x at 4, 1.7x at 8 sequences),
    while each client's pace falls with every one added; a GPU gains far more."""
    report = hardware.detect()
    if report.gpu_offload and report.gpus:
        return MOST_ON_GPU
    return max(2, min(MOST_ON_CPU, 2 * report.physical_cores))


def open_turns(db_path: Path, model_path=None, *, n_ctx=None, use_kv=True, parallel=None,
               queue=None, warn=None, kv_type=None, draft=DraftMode.AUTO, draft_model=None):
    """(turns, parallel, model path): turns answered by continuous batching, on a model
    loaded on its own thread, drafting in every slot as `draft` says (--draft)."""
    path = resolve_model_path(model_path)
    parallel = parallel or default_parallel()
    capacity = parallel + (queue if queue is not None else 4 * parallel)

    def open_engine():
        archive = Archive.open(db_path)
        try:
            return Engine.open(archive, path, n_ctx=n_ctx, use_kv=use_kv, warn=warn,
                               draft=draft, draft_model=draft_model, n_seq=parallel,
                               kv_type=kv_type)
        except BaseException:
            archive.close()
            raise

    turns = RequestLoop(open_engine, capacity)
    turns.start()
    return turns, len(turns.slots), str(path)


@contextmanager
def open_warming(archive: Archive, model_path=None, *, n_ctx=None, parallel=None, warn=None,
                 kv_type=None):
    """A Warmer (warming.py) of `parallel` sequences on a model loaded for `archive`; its
    KV is stored when the block ends."""
    parallel = parallel or default_parallel()
    engine = Engine.open(archive, model_path, n_ctx=n_ctx, warn=warn, draft=DraftMode.OFF,
                         n_seq=parallel, kv_type=kv_type)
    try:
        yield Warmer(engine, archive)
    finally:
        engine.close()
