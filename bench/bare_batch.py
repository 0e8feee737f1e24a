"""The limit for continuous batching: a bare loop decoding N sequences in one batch per step.

llama.cpp's examples/batched on the low-level API, in the very context
chatdb serve --parallel N makes: engine.machine.offload_plan.plan_offload for this machine and
N sequences (threads, flash attention, KV types, each sequence's context)
and engine.llama.model.Model with n_seq_max = N (a KV stream per sequence). Each
prompt is read in one batch, then every step is one llama_batch holding one
token per sequence and one llama_decode; greedy sampling, nothing else. Its
aggregate tokens/s is what a server can at best reach with N clients.

Threads are chatdb's own choice (engine/machine/threads.py: the cores other
processes leave free), read over an idle pause just before each run, as
chatdb serve reads them before each batch; `--threads N` fixes them, and
bench/serve.py gives it the threads chatdb serve itself chose.

    python bench/bare_batch.py [--tokens 128] [--seqs 1,2,4,8] [--threads N]
"""

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import llama_cpp  # noqa: E402

from engine.machine import hardware  # noqa: E402
from engine.llama.gguf_header import read_facts  # noqa: E402
from engine.llama.model import ContextConfig, Model  # noqa: E402
from engine.llama.model_path import resolve_model_path  # noqa: E402
from engine.prompt.chat_format import ChatFormat  # noqa: E402
from engine.machine.offload_plan import plan_offload  # noqa: E402
from engine.machine.threads import ThreadTuner  # noqa: E402

IDLE_S = 0.5   # the pause over which free cores are read before a run

PROMPTS = ["Write a long story about a lighthouse keeper.", "Describe the history of tea at length.",
           "Explain in detail how bridges are built.", "Write a long letter to a friend about a trip.",
           "Tell a long fairy tale about a dragon.", "Describe a city in great detail.",
           "Write a long essay about the sea.", "Explain at length how a car engine works."]


class BareBatch:
    """One context holding `n_seqs` sequences, as chatdb's engine configures it."""

    def __init__(self, model_path: str, n_seqs: int, tuner: ThreadTuner):
        self.tuner = tuner
        chosen = plan_offload(hardware.detect(), read_facts(model_path), threads=tuner.choice,
                      n_seq=n_seqs).config   # as chatdb serve --parallel n_seqs plans it
        self.model = Model(model_path, ContextConfig(**{**chosen.__dict__, "n_seq_max": n_seqs}))
        self.n_seqs = n_seqs

    def threads(self, chosen: "tuple[int, int] | None" = None) -> "tuple[int, int]":
        """Set (decode, batch) threads after an idle pause: `chosen`, else chatdb's choice
        read over that pause."""
        self.tuner.turn_ended()
        time.sleep(IDLE_S)
        self.tuner.recheck()
        decode, batch = chosen or (self.tuner.choice.decode, self.tuner.choice.batch)
        self.model.set_threads(decode, batch)
        return decode, batch

    def prompt(self, text: str) -> list[int]:
        rendered = ChatFormat.of(self.model).template.render([{"role": "user", "content": text}], True)
        return self.model.tokenize(rendered)

    def run(self, steps: int) -> float:
        """Aggregate tokens/s of `steps` decode steps over all sequences (prompts not counted)."""
        ctx = self.model.ctx
        llama_cpp.llama_memory_clear(self.model.memory, True)
        batch = llama_cpp.llama_batch_init(512 * self.n_seqs, 0, 1)
        sampler = llama_cpp.llama_sampler_init_greedy()
        try:
            at, pos = {}, {}
            batch.n_tokens = 0
            for s in range(self.n_seqs):
                prompt = self.prompt(PROMPTS[s % len(PROMPTS)])
                for j, token in enumerate(prompt):
                    put(batch, token, j, s, j == len(prompt) - 1)
                at[s], pos[s] = batch.n_tokens - 1, len(prompt)
            decode(ctx, batch)
            started = time.perf_counter()
            for _ in range(steps):
                batch.n_tokens = 0
                for s in range(self.n_seqs):
                    token = llama_cpp.llama_sampler_sample(sampler, ctx, at[s])
                    put(batch, token, pos[s], s, True)
                    at[s], pos[s] = batch.n_tokens - 1, pos[s] + 1
                decode(ctx, batch)
            return self.n_seqs * steps / (time.perf_counter() - started)
        finally:
            llama_cpp.llama_sampler_free(sampler)
            llama_cpp.llama_batch_free(batch)

    def close(self) -> None:
        self.model.close()


def put(batch, token: int, pos: int, seq: int, logits: bool) -> None:
    n = batch.n_tokens
    batch.token[n], batch.pos[n], batch.n_seq_id[n], batch.logits[n] = token, pos, 1, logits
    batch.seq_id[n][0] = seq
    batch.n_tokens = n + 1


def decode(ctx, batch) -> None:
    if llama_cpp.llama_decode(ctx, batch) != 0:
        raise RuntimeError("llama_decode failed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--seqs", default="1,2,4,8")
    parser.add_argument("--threads", type=int, help="fix the threads (default: chatdb's choice)")
    args = parser.parse_args()
    path, tuner = str(resolve_model_path(None)), ThreadTuner(args.threads)
    print(f"{'sequences':>9}  {'threads':>7}  {'aggregate tok/s':>15}")
    for n in map(int, args.seqs.split(",")):
        bare = BareBatch(path, n, tuner)
        try:
            decode, _ = bare.threads()
            print(f"{n:>9}  {decode:>7}  {bare.run(args.tokens):>15.1f}")
        finally:
            bare.close()


if __name__ == "__main__":
    main()
