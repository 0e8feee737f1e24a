"""What drafted guesses cost inside a pass shared by several sequences, as chatdb serve makes one.

A context with a KV stream per sequence (as `chatdb serve --parallel N` opens
it); each sequence holds --cells tokens. One step decodes one token per
sequence, plus guesses for some of them, in one llama_batch; the rejected
cells are dropped again after each step. llama.cpp splits such a batch into
micro-batches holding the same number of tokens of each sequence, so guesses
for one sequence add a micro-batch of their own. The table gives each shape's
median time as a ratio to the plain step (one token per sequence), and what a
drafted row costs against a token of the plain step: a guess pays only when
it is accepted more often than that ratio.

    python bench/shared_pass.py [--seqs 4] [--cells 300] [--steps 30] [--threads 2]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import llama_cpp as L  # noqa: E402

from engine.llama.model_path import resolve_model_path  # noqa: E402


class SharedContext:
    def __init__(self, path: str, seqs: int, cells: int, threads: int):
        L.llama_backend_init()
        self.model = L.llama_model_load_from_file(path.encode(), L.llama_model_default_params())
        params = L.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_ubatch = seqs * (cells + 128), 512, 512
        params.n_seq_max, params.kv_unified = seqs, False
        params.n_threads = params.n_threads_batch = threads
        self.ctx = L.llama_init_from_model(self.model, params)
        self.seqs, self.positions = seqs, [0] * seqs
        for seq in range(seqs):
            for start in range(0, cells, 100):
                self.decode([(seq, p) for p in range(start, min(cells, start + 100))])
            self.positions[seq] = cells

    def decode(self, entries) -> float:
        batch = L.llama_batch_init(len(entries), 0, 1)
        for i, (seq, pos) in enumerate(entries):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = 1000 + i, pos, 1
            batch.seq_id[i][0], batch.logits[i] = seq, True
        batch.n_tokens = len(entries)
        started = time.perf_counter()
        if L.llama_decode(self.ctx, batch) != 0:
            raise RuntimeError("llama_decode failed")
        elapsed = time.perf_counter() - started
        L.llama_batch_free(batch)
        return elapsed

    def step(self, guesses: list[int]) -> float:
        """One pass: a token for each sequence and guesses[s] more for sequence s; the
        guesses' cells are dropped again, as rejected ones are."""
        entries = [(s, self.positions[s] + j) for s in range(self.seqs) for j in range(1 + guesses[s])]
        elapsed = self.decode(entries)
        memory = L.llama_get_memory(self.ctx)
        for s in range(self.seqs):
            L.llama_memory_seq_rm(memory, s, self.positions[s] + 1, -1)
            self.positions[s] += 1
        return elapsed


def shapes(seqs: int) -> dict:
    zero = [0] * seqs
    return {"plain step": zero, "6 guesses for one": [6, *zero[1:]],
            "6 and 3 for two": [6, 3, *zero[2:]][:seqs], "1 guess for each": [1] * seqs,
            "6 guesses for each": [6] * seqs}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seqs", type=int, default=4)
    parser.add_argument("--cells", type=int, default=300)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    shared = SharedContext(str(resolve_model_path(None)), args.seqs, args.cells, args.threads)
    times = {name: [] for name in shapes(args.seqs)}
    for _ in range(args.steps):   # the shapes interleaved, so that load moves all alike
        for name, guesses in shapes(args.seqs).items():
            times[name].append(shared.step(guesses))
    plain = statistics.median(times["plain step"])
    per_token = plain / args.seqs
    print(f"{args.seqs} sequences of {args.cells} cells, {args.threads} threads, median of {args.steps}")
    print(f"{'pass':<20} {'rows':>5} {'x plain step':>13} {'a drafted row / a plain token':>31}")
    for name, guesses in shapes(args.seqs).items():
        median, extra = statistics.median(times[name]), sum(guesses)
        row = f"{(median - plain) / extra / per_token:.2f}" if extra else "-"
        print(f"{name:<20} {args.seqs + extra:>5} {median / plain:>12.2f}x {row:>31}")


if __name__ == "__main__":
    main()
