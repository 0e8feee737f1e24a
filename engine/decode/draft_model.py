"""A smaller model that guesses the target's next tokens (speculative decoding).

It has a sequence for each of the target's (a slot's drafter: `drafter(i)`),
and its KV follows each slot's conversation like the target's: the same
prefix reuse in memory, and its own segments in the archive under its own
fingerprint, so a resumed chat restores both models' state. Its guesses are
computed one slot at a time, each in its own sequence.
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
        first = KVCache(Sequence(self.model), archive,
                        archive_source(self.kv_mode, self.fingerprint, self.layout),
                        use_archive=use_archive, warn=warn)
        self.caches = [first] + [first.sibling(i) for i in range(1, self.model.config.n_seq_max)]
        self.sampler = Sampler(SamplingSettings(temperature=0))

    @property
    def cache(self) -> KVCache:
        """The first sequence's (the console's)."""
        return self.caches[0]

    def drafter(self, index: int) -> "ModelDrafter":
        """The drafter of the target's sequence `index`."""
        return ModelDrafter(self, self.caches[index])

    def follow_threads(self, target: Model) -> None:
        """Use the target's thread counts (chosen for the free cores before each turn)."""
        decode, batch = target.threads_decode, target.threads_batch
        if (decode, batch) != (self.model.threads_decode, self.model.threads_batch):
            self.model.set_threads(decode, batch)

    def close(self) -> None:
        self.sampler.close()
        for cache in self.caches:
            cache.close()
        self.model.close()


class ModelDrafter:
    """Greedy guesses of the draft model in one of its sequences."""

    def __init__(self, draft: DraftModel, cache: KVCache):
        self.draft, self.cache = draft, cache

    def restore(self, prompt: np.ndarray, path, owner: "str | None" = None):
        """The draft model's KV for `prompt` (kv.cache.Restored), as the target's is restored:
        from its sequence, memory or its own segments along `path` in the archive (`owner`'s
        only, as the target's)."""
        return self.cache.restore(prompt, path, owner=owner)

    def propose(self, context: list[int], k: int) -> list[int]:
        """k greedy guesses after `context`."""
        self.cache.follow(np.asarray(context, np.int32))
        sampler, ctx, seq = self.draft.sampler, self.draft.model.ctx, self.cache.seq
        drafts = []
        for j in range(k):
            token = sampler.sample(ctx)
            drafts.append(token)
            if j + 1 < k:
                seq.step(token)
        return drafts
