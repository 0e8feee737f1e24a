"""A smaller model that guesses the target's next tokens (speculative decoding).

Its KV follows the conversation like the target's: the same prefix reuse in
memory, and its own segments in the archive under its own fingerprint, so a
resumed chat restores both models' state.
"""

import numpy as np

from chatdb.archive import Archive

from ..kv.cache import KVCache, archive_source
from ..kv.fingerprint import file_fingerprint, kv_config_fingerprint
from ..kv.layout_check import check_layout
from ..llama.model import ContextConfig, Model
from ..llama.model_path import resolve_model_path
from ..llama.sampling import Sampler, SamplingSettings
from ..llama.sequence import Sequence
from ..llama.vocab import check_same_vocab


class DraftModel:
    def __init__(self, path, target: Model, archive: Archive, use_archive: bool, warn):
        path = resolve_model_path(path)
        config = ContextConfig(**{**target.config.__dict__})
        self.model = Model(str(path), config)
        try:
            check_same_vocab(target, self.model)
        except Exception:
            self.model.close()
            raise
        self.layout, self.kv_mode = check_layout(self.model, warn)
        self.fingerprint = kv_config_fingerprint(file_fingerprint(path, archive.fingerprints),
                                                 self.model.config, self.kv_mode, role="draft")
        self.cache = KVCache(Sequence(self.model), archive,
                             archive_source(self.kv_mode, self.fingerprint, self.layout),
                             use_archive=use_archive, warn=warn)
        self.sampler = Sampler(SamplingSettings(temperature=0))

    def follow_threads(self, target: Model) -> None:
        """Use the target's thread counts (chosen for the free cores before each turn)."""
        decode, batch = target.config.n_threads, target.threads_batch
        if (decode, batch) != (self.model.config.n_threads, self.model.threads_batch):
            self.model.set_threads(decode, batch)

    def propose(self, context: list[int], k: int) -> list[int]:
        """k greedy guesses after `context`."""
        self.cache.follow(np.asarray(context, np.int32))
        drafts, position = [], len(context)
        for j in range(k):
            token = self.sampler.sample(self.model.ctx)
            drafts.append(token)
            if j + 1 < k:
                self.cache.decoder.step(token, position)
                self.cache.mark_decoded([token])
                position += 1
        return drafts

    def close(self) -> None:
        self.sampler.close()
        self.cache.close()
        self.model.close()
