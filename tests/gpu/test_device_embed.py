"""Search by meaning on the device: the embedding model offloaded whole, its vectors the
CPU's within cosine 0.999."""

import json
import subprocess

import numpy as np

from engine.embed.embedder import has_gpu
from engine.embed.model import EmbeddingModel

from ..embed.test_meaning_search import CHATS
from .conftest import ROOT, cpu_python

TEXTS = [text for turns in CHATS.values() for _, text in turns] + ["that flaky upload fix"]
ON_CPU = ("import json, sys; from engine.embed.model import EmbeddingModel; "
          "m = EmbeddingModel(sys.argv[1]); "
          "print(json.dumps(m.embed(json.load(sys.stdin)).tolist())); m.close()")


def test_embeddings_on_the_device_match_the_cpus(embed_path):
    assert has_gpu()   # what Embedder.open offloads by
    with EmbeddingModel(str(embed_path), gpu=True) as model:
        device = model.embed(TEXTS)
    python, env = cpu_python()
    done = subprocess.run([python, "-c", ON_CPU, str(embed_path)], input=json.dumps(TEXTS),
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    cpu = np.asarray(json.loads(done.stdout), dtype=np.float32)
    assert device.shape == cpu.shape == (len(TEXTS), model.dims)
    cosines = np.sum(device * cpu, axis=1) / (np.linalg.norm(device, axis=1) * np.linalg.norm(cpu, axis=1))
    assert cosines.min() >= 0.999, cosines
