"""Opening the engine for a server: the archive, the model, and who answers turns."""

from pathlib import Path

from chatdb.archive import Archive

from .chat import Engine
from .model_path import resolve_model_path
from .turn_queue import TurnQueue


def default_parallel() -> int:
    return 4


def open_turns(db_path: Path, model_path=None, *, n_ctx=None, use_kv=True, parallel=None,
               queue=None, warn=None):
    """(turns, parallel, model path): turns answered by a model loaded on its own thread."""
    path = resolve_model_path(model_path)
    parallel = parallel or default_parallel()
    capacity = parallel + (queue if queue is not None else 4 * parallel)

    def open_engine():
        archive = Archive.open(db_path)
        try:
            return Engine.open(archive, path, n_ctx=n_ctx, use_kv=use_kv, warn=warn)
        except BaseException:
            archive.close()
            raise

    turns = TurnQueue(open_engine, capacity)
    turns.start()
    return turns, parallel, str(path)
