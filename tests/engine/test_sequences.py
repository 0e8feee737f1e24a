"""Several sequences on one context: each KVCache keeps its own KV, and states move between them."""

import numpy as np
import pytest

from chatdb.archive import Archive
from engine.batching.job import Job
from engine.batching.scheduler import Scheduler
from engine.batching.slot import Slot
from engine.kv.cache import KVCache, archive_source
from engine.kv.layout_check import check_layout
from engine.kv.memory_states import MemoryStates
from engine.llama.model import ContextConfig, Model
from engine.llama.sampling import SamplingSettings
from engine.llama.sequence import Sequence

GREEDY = SamplingSettings(temperature=0)


@pytest.fixture
def two_sequences(model_path, db_path):
    # One thread: two wait for each other at every layer, and stall whenever
    # another process (another test) holds one of the cores.
    model = Model(str(model_path), ContextConfig(n_ctx=2048, n_batch=512, n_threads=1,
                                                 flash_attn=False, n_seq_max=2))
    archive = Archive.open(db_path)
    layout, mode = check_layout(model, lambda message: None)
    stored = archive_source(mode, "test", layout)
    memory = MemoryStates()  # shared: a state of one sequence loads into the other
    caches = [KVCache(Sequence(model, seq_id), archive, stored, use_archive=False, memory=memory)
              for seq_id in (0, 1)]
    yield model, caches
    for cache in caches:
        cache.close()
    archive.close()
    model.close()


def _prompt(model, text):
    return np.asarray(model.tokenize(f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"),
                      np.int32)


def _answer(model, cache, prompt, n=12):
    """(how its prompt's KV was restored, the answer's tokens): one slot on `cache` alone."""
    job = Job(prompt, GREEDY.with_(max_tokens=n))
    scheduler = Scheduler(model, [Slot(cache, model)])
    try:
        scheduler.run(job)
    finally:
        scheduler.close()
    return job.figures.restored, job.generation.tokens


def test_two_sequences_keep_their_own_kv(two_sequences):
    model, (a, b) = two_sequences
    pa, pb = _prompt(model, "Name a colour."), _prompt(model, "Name a city in France.")
    _, alone = _answer(model, a, pa)
    a.reset()
    _, first = _answer(model, a, pa)
    _, other = _answer(model, b, pb)        # decoding sequence 1 leaves sequence 0 alone
    assert first == alone and other != alone
    again, repeat = _answer(model, a, pa)
    assert again.source == "live" and again.restored_tokens == len(pa) - 1
    assert repeat == alone
    assert b.live.tolist() == pb.tolist() + other[:-1]


def test_a_state_of_one_sequence_loads_into_another(two_sequences):
    model, (a, b) = two_sequences
    prompt = _prompt(model, "Tell me about the sea. " * 8)
    _, expected = _answer(model, a, prompt)
    a.memory.stash(a.seq)
    moved, tokens = _answer(model, b, prompt)
    assert moved.source == "memory" and moved.restored_tokens == len(prompt) - 1
    assert tokens == expected
