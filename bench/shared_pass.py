"""What drafted guesses cost inside a pass shared by several sequences, as chatdb serve makes one.

The context `chatdb serve --parallel N` opens (bench/bare_batch.py's: a KV
stream per sequence, chatdb's offload plan and threads); each sequence holds
--cells tokens. One step decodes one token per sequence, plus guesses for
some of them, in one llama_batch; the rejected cells are dropped again after
each step. llama.cpp splits such a batch into
micro-batches holding the same number of tokens of each sequence, so guesses
for one sequence add a micro-batch of their own. The table gives each shape's
median time as a ratio to the plain step (one token per sequence), and what a
drafted row costs against a token of the plain step: a guess pays only when
it is accepted more often than that ratio.

    python bench/shared_pass.py [--seqs 4] [--cells 300] [--steps 30] [--threads N]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import llama_cpp  # noqa: E402

from bare_batch import BareBatch, decode, put  # noqa: E402
from engine.llama.model_path import resolve_model_path  # noqa: E402
from engine.machine.threads import ThreadTuner  # noqa: E402


class SharedPass:
    """chatdb serve's context for `seqs` sequences (bare_batch.BareBatch), each holding
    `cells` tokens, stepped with guesses."""

    def __init__(self, bare: BareBatch, cells: int):
        self.model, self.seqs = bare.model, bare.n_seqs
        self.batch = llama_cpp.llama_batch_init(max(self.model.config.n_batch, 64), 0, 1)
        llama_cpp.llama_memory_clear(self.model.memory, True)
        for seq in range(self.seqs):
            for start in range(0, cells, 100):
                self._pass([(seq, pos) for pos in range(start, min(cells, start + 100))])
        self.positions = [cells] * self.seqs

    def _pass(self, entries) -> float:
        """One llama_decode of (sequence, position) rows; its seconds."""
        self.batch.n_tokens = 0
        for i, (seq, pos) in enumerate(entries):
            put(self.batch, 1000 + i, pos, seq, True)
        started = time.perf_counter()
        decode(self.model.ctx, self.batch)
        return time.perf_counter() - started

    def step(self, guesses: list[int]) -> float:
        """One pass: a token for each sequence and guesses[s] more for sequence s; the
        guesses' cells are dropped again, as rejected ones are."""
        elapsed = self._pass([(s, self.positions[s] + j)
                              for s in range(self.seqs) for j in range(1 + guesses[s])])
        for s in range(self.seqs):
            self.positions[s] += 1
            llama_cpp.llama_memory_seq_rm(self.model.memory, s, self.positions[s], -1)
        return elapsed

    def close(self) -> None:
        llama_cpp.llama_batch_free(self.batch)


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
    parser.add_argument("--threads", type=int, help="fix the threads (default: chatdb's choice)")
    args = parser.parse_args(argv)
    bare = BareBatch(str(resolve_model_path(None)), args.seqs, ThreadTuner(args.threads))
    shared = None
    try:
        decode_threads, _ = bare.threads()
        shared = SharedPass(bare, args.cells)
        times = {name: [] for name in shapes(args.seqs)}
        for _ in range(args.steps):   # the shapes interleaved, so that load moves all alike
            for name, guesses in shapes(args.seqs).items():
                times[name].append(shared.step(guesses))
    finally:
        if shared is not None:
            shared.close()
        bare.close()
    plain = statistics.median(times["plain step"])
    per_token = plain / args.seqs
    print(f"{args.seqs} sequences of {args.cells} cells, {decode_threads} threads, "
          f"median of {args.steps}")
    print(f"{'pass':<20} {'rows':>5} {'x plain step':>13} {'a drafted row / a plain token':>31}")
    for name, guesses in shapes(args.seqs).items():
        median, extra = statistics.median(times[name]), sum(guesses)
        row = f"{(median - plain) / extra / per_token:.2f}" if extra else "-"
        print(f"{name:<20} {args.seqs + extra:>5} {median / plain:>12.2f}x {row:>31}")


if __name__ == "__main__":
    main()
