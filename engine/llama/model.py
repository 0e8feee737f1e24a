"""A loaded GGUF model and its context: tokenizer, special tokens, KV memory.

Built on llama-cpp-python's bindings of llama.cpp's C API, the same calls as
llama.cpp's examples/simple (llama_model_load_from_file, llama_init_from_model,
...), neither on its high-level Llama class nor on its private wrappers:
chatdb owns the decode loop and the KV cache.
"""

import ctypes
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum

import llama_cpp
import numpy as np

from ..errors import EngineError
from . import exact_kernels, state_streams


class MemoryKind(StrEnum):
    """What a model keeps per sequence, as llama.cpp builds its memory."""
    ATTENTION = "attention"   # plain KV cells, one per token
    ISWA = "iswa"             # with sliding-window layers (interleaved)
    RECURRENT = "recurrent"   # a fixed-size state that moves on with every token
    HYBRID = "hybrid"         # attention and recurrent layers

    @property
    def cuts_back(self) -> bool:
        """Whether the memory can be cut back to an earlier position (not a recurrent state)."""
        return self in (MemoryKind.ATTENTION, MemoryKind.ISWA)


@dataclass(frozen=True)
class ContextConfig:
    n_ctx: int
    n_batch: int
    n_threads: int
    flash_attn: bool
    type_k: int = llama_cpp.GGML_TYPE_F16
    type_v: int = llama_cpp.GGML_TYPE_F16
    n_gpu_layers: int = 0
    n_threads_batch: "int | None" = None     # prefill threads; None: as n_threads
    n_seq_max: int = 1        # sequences the context holds at once (sequence.py)
    # The GPU devices llama.cpp computes on ("Vulkan0: llvmpipe ..."; none: the CPU alone).
    # It offloads n_gpu_layers to them, and batches' large products even with none.
    devices: tuple = ()


class Model:
    """One model file loaded with one context; its KV is kept per sequence (sequence.py)."""

    def __init__(self, path: str, config: ContextConfig):
        self.path, self.config = path, config
        llama_cpp.llama_backend_init()
        llama_cpp.llama_log_set(_quiet_log, ctypes.c_void_p(0))
        mparams = llama_cpp.llama_model_default_params()
        mparams.n_gpu_layers = config.n_gpu_layers
        exact_kernels.apply(mparams)
        with caught_errors() as errors:
            self.model = llama_cpp.llama_model_load_from_file(path.encode("utf-8"), mparams)
        if not self.model:
            raise EngineError(f"could not load model {path}: {_said(errors, 'not a model file')}")
        n_ctx = min(config.n_ctx, self.n_ctx_train())
        # Several sequences only where their states convert to the one-stream form (state_streams.py).
        n_seq = config.n_seq_max if STATE_PARTS.get(self.memory_kind()) else 1
        self.config = config = ContextConfig(**{**config.__dict__, "n_ctx": n_ctx, "n_seq_max": n_seq})
        cparams = llama_cpp.llama_context_default_params()
        # n_ctx is each sequence's: a KV stream of that size per sequence.
        cparams.n_ctx, cparams.n_batch, cparams.n_ubatch = n_ctx * n_seq, config.n_batch, config.n_batch
        cparams.n_threads, cparams.n_threads_batch = config.n_threads, self.threads_batch
        cparams.n_seq_max = config.n_seq_max
        # Sliding-window layers get a full-size cache (llama.cpp's default here,
        # set to be sure): cells stay in position order and masked ones stay
        # until the context is full, so a rebuilt state computes bit for bit
        # as the live one, and the live cache can be cut back to any earlier
        # point (a window-sized ring loses the cells before its window).
        cparams.swa_full = True
        # A KV stream per sequence: each sequence's cells are laid out as they would be
        # alone, so its answer does not depend on what else is in the batch (state_streams.py).
        cparams.kv_unified = False
        cparams.type_k, cparams.type_v = config.type_k, config.type_v
        cparams.flash_attn_type = (llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if config.flash_attn
                                   else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
        cparams.no_perf = True
        with caught_errors() as errors:
            self.ctx = llama_cpp.llama_init_from_model(self.model, cparams)
        if not self.ctx:
            self.close()
            raise EngineError(f"could not create a context for {path}: "
                              f"{_said(errors, 'llama.cpp refused it')}")
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.memory = llama_cpp.llama_get_memory(self.ctx)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)
        self.refusal = ""   # why llama.cpp last refused a state (set_state)
        # Each token's bytes and whether it ends generation, once asked for: a stream asks at
        # every token.
        self._pieces: dict[int, bytes] = {}
        self._eog: dict[int, bool] = {}

    # -- facts about the model ----------------------------------------------

    @property
    def n_ctx(self) -> int:
        return self.config.n_ctx

    @property
    def threads_decode(self) -> int:
        """The threads of one-token passes (llama.cpp's n_threads)."""
        return self.config.n_threads

    @property
    def threads_batch(self) -> int:
        """The threads of longer passes, prompts and drafted guesses (n_threads_batch)."""
        return self.config.n_threads_batch or self.config.n_threads

    def set_threads(self, decode: int, batch: int) -> None:
        """Change the thread counts between turns (llama.cpp applies them at the next decode)."""
        llama_cpp.llama_set_n_threads(self.ctx, decode, batch)
        self.config = ContextConfig(**{**self.config.__dict__, "n_threads": decode,
                                       "n_threads_batch": batch})

    @property
    def on_cpu(self) -> bool:
        """Every layer runs on the CPU backend (see cpu_costs)."""
        return self.config.n_gpu_layers == 0

    @property
    def n_layer(self) -> int:
        return llama_cpp.llama_model_n_layer(self.model)

    def n_ctx_train(self) -> int:
        return llama_cpp.llama_model_n_ctx_train(self.model)

    def metadata(self) -> dict:
        """The GGUF's metadata, every value as text (as llama.cpp gives it)."""
        count = llama_cpp.llama_model_meta_count(self.model)
        return {_text(llama_cpp.llama_model_meta_key_by_index, self.model, i):
                _text(llama_cpp.llama_model_meta_val_str_by_index, self.model, i)
                for i in range(count)}

    def description(self) -> str:
        """llama.cpp's words for the model: "llama 256M Q4_1"."""
        buf = ctypes.create_string_buffer(256)
        llama_cpp.llama_model_desc(self.model, buf, len(buf))
        return buf.value.decode("utf-8", errors="replace")

    def size_bytes(self) -> int:
        return llama_cpp.llama_model_size(self.model)

    def memory_kind(self) -> MemoryKind:
        if llama_cpp.llama_model_is_hybrid(self.model):
            return MemoryKind.HYBRID
        if llama_cpp.llama_model_is_recurrent(self.model):
            return MemoryKind.RECURRENT
        return MemoryKind.ISWA if llama_cpp.llama_model_n_swa(self.model) > 0 else MemoryKind.ATTENTION

    @property
    def cuts_back(self) -> bool:
        """Whether the KV can be cut back to an earlier position (not a recurrent state)."""
        return self.memory_kind().cuts_back

    @property
    def attention_span(self) -> int:
        """The position at which a token's attention costs as much as the rest of its
        forward pass: its matrix products are about one multiply-add per weight, and
        attention at position p about 2 * n_layer * n_embd * p (scores, then values)."""
        per_position = 2 * self.n_layer * max(1, llama_cpp.llama_model_n_embd(self.model))
        return max(1, llama_cpp.llama_model_n_params(self.model) // per_position)

    @property
    def n_swa(self) -> int:
        """The sliding window of the sliding-window layers (0: none)."""
        return llama_cpp.llama_model_n_swa(self.model)

    # -- tokens --------------------------------------------------------------

    def tokenize(self, text: str, special: bool = True) -> list[int]:
        """Tokens of prompt text; special tokens (<|im_start|>) are parsed as such."""
        return tokens_of(self.vocab, text.encode("utf-8"), add_special=False, parse_special=special)

    def piece(self, token: int, special: bool = False) -> bytes:
        """The bytes of one token (possibly part of a UTF-8 character)."""
        if not special:
            known = self._pieces.get(token)
            if known is None:
                known = self._pieces[token] = self._piece(token, False)
            return known
        return self._piece(token, True)

    def _piece(self, token: int, special: bool) -> bytes:
        buf = ctypes.create_string_buffer(64)
        n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, 64, 0, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, -n, 0, special)
        return buf.raw[:n]

    def is_eog(self, token: int) -> bool:
        eog = self._eog.get(token)
        if eog is None:
            eog = self._eog[token] = bool(llama_cpp.llama_vocab_is_eog(self.vocab, token))
        return eog

    def token_text(self, token: int) -> str:
        return self.piece(token, special=True).decode("utf-8", errors="replace")

    def logits(self, row: int = -1) -> np.ndarray:
        """The logits of batch row `row` of the last pass (-1: its last row with logits), as
        a view of llama.cpp's buffer: valid until the next pass."""
        return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self.ctx, row),
                                     shape=(self.n_vocab,))

    # -- the KV memory, per sequence ------------------------------------------

    def forget_from(self, position: int, seq_id: int = 0) -> bool:
        """Drop the sequence's KV cells at `position` and after; False where llama.cpp
        cannot (a recurrent state is not cut back: only dropped whole, from 0)."""
        return bool(llama_cpp.llama_memory_seq_rm(self.memory, seq_id, position, -1))

    def clear(self) -> None:
        """Drop the KV of every sequence."""
        llama_cpp.llama_memory_clear(self.memory, True)

    def get_state(self, seq_id: int = 0) -> memoryview:
        """A sequence's state (llama.cpp's byte layout), without an extra copy."""
        size = llama_cpp.llama_state_seq_get_size(self.ctx, seq_id)
        buf = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(self.ctx, buf, size, seq_id)
        state = memoryview(buf).cast("B")[:written]
        if self.config.n_seq_max > 1:  # the one-stream form, as a one-sequence context has it
            return memoryview(state_streams.to_single(state, self.config.n_seq_max, self._parts))
        return state

    def set_state(self, data, seq_id: int = 0) -> bool:
        """Load a sequence state (any buffer); False if llama.cpp refused it (the sequence is
        then empty, and `refusal` says why: its error lines are caught, not printed). Other
        sequences keep their KV."""
        self.forget_from(0, seq_id)
        buf = np.frombuffer(data, np.uint8)  # no copy
        if self.config.n_seq_max > 1:
            try:
                buf = state_streams.to_streams(buf, self.config.n_seq_max, self._parts)
            except ValueError as exc:
                self.refusal = str(exc)
                return False
        src = buf.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))
        with caught_errors() as errors:
            loaded = llama_cpp.llama_state_seq_set_data(self.ctx, src, buf.nbytes, seq_id) != 0
        if loaded:
            return True
        self.forget_from(0, seq_id)
        self.refusal = _said(errors, "no reason given")
        return False

    @property
    def _parts(self) -> int:
        return STATE_PARTS[self.memory_kind()]

    def close(self) -> None:
        """Free the context, then the model (the context uses the model)."""
        if getattr(self, "ctx", None):
            llama_cpp.llama_free(self.ctx)
            self.ctx = None
        if getattr(self, "model", None):
            llama_cpp.llama_model_free(self.model)
            self.model = None

    def __del__(self):  # a model its owner did not close is freed with it
        self.close()


# KV caches in a sequence's state, by memory kind (memory_kind): the kinds whose
# states state_streams.py converts. Recurrent and hybrid models get one sequence.
STATE_PARTS = {MemoryKind.ATTENTION: 1, MemoryKind.ISWA: 2}

GGML_LOG_LEVEL_ERROR = 4  # ggml.h: NONE, DEBUG, INFO, WARN, ERROR, CONT


def _text(read, model, index: int) -> str:
    """A string llama.cpp writes into a buffer (`read`: a llama_model_meta_*_by_index
    call), whatever its length: it returns the length it needed."""
    size = 1024
    while True:
        buf = ctypes.create_string_buffer(size)
        needed = read(model, index, buf, size)
        if needed < size:
            return buf.value.decode("utf-8", errors="replace")
        size = needed + 1


def _said(errors: "list[str]", otherwise: str) -> str:
    """llama.cpp's error lines as one line, or `otherwise` where it said nothing."""
    return " ".join(" ".join(errors).split()) or otherwise


_catching = threading.local()   # .lines: where this thread's llama.cpp errors go instead


@contextmanager
def caught_errors():
    """llama.cpp's error lines logged on this thread meanwhile, for the caller to word."""
    _catching.lines = lines = []
    try:
        yield lines
    finally:
        _catching.lines = None


@llama_cpp.llama_log_callback
def _quiet_log(level, text, user_data):
    """llama.cpp logs load details to stderr; only errors matter to a chat user."""
    if level == GGML_LOG_LEVEL_ERROR:
        message = text.decode(errors="replace")
        lines = getattr(_catching, "lines", None)
        if lines is not None:
            lines.append(message)
        else:
            sys.stderr.write(message)


def tokens_of(vocab, data: bytes, add_special: bool, parse_special: bool) -> list[int]:
    """llama.cpp's tokens of `data` in `vocab` (a model's or an embedding model's); a buffer too
    small is made the size llama.cpp asks for, and the text tokenized again."""
    size = len(data) + 16
    buf = (llama_cpp.llama_token * size)()
    n = llama_cpp.llama_tokenize(vocab, data, len(data), buf, size, add_special, parse_special)
    if n < 0:
        size = -n
        buf = (llama_cpp.llama_token * size)()
        n = llama_cpp.llama_tokenize(vocab, data, len(data), buf, size, add_special, parse_special)
    return list(buf[:n])
