"""An embedding model: llama.cpp in embedding mode, several texts per forward pass.

    with EmbeddingModel(path) as model:
        vectors = model.embed(["a question", "an answer"])   # (2, dims), unit length

Any GGUF embedding model works: BERT-style encoders (all-MiniLM, bge, e5:
non-causal, run with llama_encode) and decoder models with a pooling type
(run with llama_decode, their memory cleared between passes). The pooling
is the model's own; a model that names none is mean-pooled. Vectors are
normalised to unit length, so a dot product is the cosine similarity.

Sequences are packed into one batch up to BATCH_TOKENS tokens and MAX_SEQ
sequences: each pass has a fixed cost that short messages alone would pay
again and again, and a non-causal model must see each sequence whole in one
pass.
"""

import ctypes
import threading

import llama_cpp
import numpy as np

from ..errors import EngineError
from ..llama import exact_kernels
from ..llama.model import _quiet_log, tokens_of

# Tokens per forward pass (and the context: an encoder keeps no KV). A
# non-causal pass attends across all its tokens, masked by sequence, so its
# attention grows with the square of the batch: on two cores 512 tokens (four
# chat messages, or eight short ones) embedded 15% more messages per CPU-second
# than 1,024, and as many as 256 (bench/search.py).
BATCH_TOKENS = 512
MAX_SEQ = 8           # sequences per forward pass (a power of two, as llama.cpp wants)
MAX_TOKENS = 512      # the longest sequence embedded, [CLS] and [SEP] included


class EmbeddingModel:
    def __init__(self, path: str, threads: int = 1, batch_tokens: int = BATCH_TOKENS,
                 max_seq: int = MAX_SEQ, gpu: bool = False):
        """`batch_tokens` and `max_seq`: what one pass holds (a query alone needs
        MAX_TOKENS and 1: a smaller compute buffer); `gpu`: every layer offloaded
        (an embedding model is small beside any chat model)."""
        self.path = str(path)
        self.batch_tokens, self.max_seq = max(batch_tokens, MAX_TOKENS), max_seq
        llama_cpp.llama_backend_init()
        llama_cpp.llama_log_set(_quiet_log, ctypes.c_void_p(0))
        mparams = llama_cpp.llama_model_default_params()
        mparams.n_gpu_layers = -1 if gpu else 0
        exact_kernels.apply(mparams)   # a text embeds the same alone as in a batch of others
        self.model = llama_cpp.llama_model_load_from_file(self.path.encode(), mparams)
        if not self.model:
            raise EngineError(f"could not load embedding model {self.path}")
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.encoder = bool(llama_cpp.llama_model_has_encoder(self.model)
                            and not llama_cpp.llama_model_has_decoder(self.model))
        self.max_tokens = min(MAX_TOKENS, llama_cpp.llama_model_n_ctx_train(self.model) or MAX_TOKENS)
        self.ctx = self._context(threads)
        self.dims = llama_cpp.llama_model_n_embd_out(self.model) or llama_cpp.llama_model_n_embd(self.model)
        self.pooling = llama_cpp.llama_pooling_type(self.ctx)
        self.ends_with_sep = bool(llama_cpp.llama_vocab_get_add_sep(self.vocab)
                                  or llama_cpp.llama_vocab_get_add_eos(self.vocab))
        self.batch = llama_cpp.llama_batch_init(self.batch_tokens, 0, 1)
        self.lock = threading.Lock()   # one pass at a time (a server's threads share it)
        self.passes = 0

    def _context(self, threads: int):
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = cparams.n_batch = cparams.n_ubatch = self.batch_tokens
        cparams.n_seq_max = self.max_seq
        cparams.n_threads = cparams.n_threads_batch = threads
        cparams.embeddings = True
        cparams.no_perf = True
        ctx = llama_cpp.llama_init_from_model(self.model, cparams)
        if not ctx:
            llama_cpp.llama_model_free(self.model)
            raise EngineError(f"could not create an embedding context for {self.path}")
        if llama_cpp.llama_pooling_type(ctx) in (llama_cpp.LLAMA_POOLING_TYPE_NONE,
                                                 llama_cpp.LLAMA_POOLING_TYPE_RANK):
            llama_cpp.llama_free(ctx)   # a model without pooling of its own: mean-pool it
            cparams.pooling_type = llama_cpp.LLAMA_POOLING_TYPE_MEAN
            ctx = llama_cpp.llama_init_from_model(self.model, cparams)
        return ctx

    def description(self) -> str:
        buf = ctypes.create_string_buffer(256)
        llama_cpp.llama_model_desc(self.model, buf, 256)
        return buf.value.decode(errors="replace")

    def set_threads(self, threads: int) -> None:
        llama_cpp.llama_set_n_threads(self.ctx, threads, threads)

    # -- tokens --------------------------------------------------------------

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` without the special ones each sequence adds."""
        return len(self._tokenize(text, add_special=False))

    def tokens(self, text: str) -> list[int]:
        """The sequence embedded for `text`: special tokens added, cut to max_tokens
        (keeping the closing [SEP] where the model adds one)."""
        tokens = self._tokenize(text, add_special=True)
        if len(tokens) > self.max_tokens:
            tokens = tokens[:self.max_tokens - 1] + tokens[-1:] if self.ends_with_sep \
                else tokens[:self.max_tokens]
        return tokens

    def tokens_whole(self, text: str) -> "list[int] | None":
        """The sequence for `text`, or None if it is longer than max_tokens (not cut)."""
        tokens = self._tokenize(text, add_special=True)
        return tokens if len(tokens) <= self.max_tokens else None

    def _tokenize(self, text: str, add_special: bool) -> list[int]:
        return tokens_of(self.vocab, text.encode("utf-8", errors="replace"), add_special,
                         parse_special=False)

    # -- vectors -------------------------------------------------------------

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit vectors (float32, one row per text), several texts per forward pass."""
        return self.embed_tokens([self.tokens(text) for text in texts])

    def embed_tokens(self, sequences: list[list[int]]) -> np.ndarray:
        out = np.empty((len(sequences), self.dims), np.float32)
        with self.lock:
            start = 0
            while start < len(sequences):
                stop = self._pack(sequences, start)
                self._pass(sequences[start:stop], out[start:stop])
                start = stop
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)

    def _pack(self, sequences, start: int) -> int:
        """The end of the run of sequences from `start` that one pass holds."""
        total, stop = 0, start
        while stop < len(sequences) and stop - start < self.max_seq:
            n = max(1, len(sequences[stop]))
            if total + n > self.batch_tokens and stop > start:
                break
            total += n
            stop += 1
        return stop

    def _pass(self, sequences, out: np.ndarray) -> None:
        b, n = self.batch, 0
        for seq_id, tokens in enumerate(sequences):
            tokens = tokens or self._tokenize("", add_special=True) or [0]
            for pos, token in enumerate(tokens[:self.max_tokens]):
                b.token[n], b.pos[n], b.n_seq_id[n], b.logits[n] = token, pos, 1, True
                b.seq_id[n][0] = seq_id
                n += 1
        b.n_tokens = n
        if self.encoder:
            rc = llama_cpp.llama_encode(self.ctx, b)
        else:
            memory = llama_cpp.llama_get_memory(self.ctx)
            if memory:  # a decoder model's KV: each pass starts empty
                llama_cpp.llama_memory_clear(memory, True)
            rc = llama_cpp.llama_decode(self.ctx, b)
        if rc != 0:
            raise EngineError(f"the embedding model's forward pass failed (status {rc})")
        self.passes += 1
        for seq_id in range(len(sequences)):
            pointer = llama_cpp.llama_get_embeddings_seq(self.ctx, seq_id)
            if not pointer:
                raise EngineError("the embedding model gave no pooled vector")
            out[seq_id] = np.ctypeslib.as_array(pointer, shape=(self.dims,))

    def close(self) -> None:
        if self.ctx:
            llama_cpp.llama_batch_free(self.batch)
            llama_cpp.llama_free(self.ctx)
            llama_cpp.llama_model_free(self.model)
            self.ctx = self.model = None

    def __enter__(self) -> "EmbeddingModel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
