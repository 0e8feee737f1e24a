"""chatdb's decode rate against a bare llama.cpp loop, on an idle and on a busy machine.

The bare loop is llama.cpp's examples/simple in Python on the low-level API:
one llama_batch, llama_decode, a greedy sampler, nothing else, with
llama.cpp's default thread count (one per physical core). chatdb's rate is
Engine.reply's decode_tokens_per_s (streaming, UTF-8, cancellation checks
and all) with the threads it chooses itself. Both use the same model file
and context, and alternate over --repeat rounds; medians are compared.

The busy case runs the same with one CPU-bound process competing (a spinning
Python process, stopped after --busy-limit seconds at most and killed at the
end), as a browser tab or a build would.

On a machine others use, the threads chatdb chooses for the free cores can
beat llama.cpp's default by far; the cost of chatdb's own turn pipeline (a
scheduler of one slot: its sequence, batch, sampler, stream, drafting) is
told apart by a second bare loop, run right after each chatdb answer on the
threads that answer used: the `/same` column, the median of each round's
own ratio.

    python bench/decode.py [--tokens 128] [--repeat 5] [--cases idle,busy]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import llama_cpp  # noqa: E402

from chatdb.archive import Archive  # noqa: E402
from engine.chat import Engine  # noqa: E402
from engine.llama.sampling import SamplingSettings  # noqa: E402

PROMPT = "Write a long, detailed story about a lighthouse keeper and a storm."


SPIN = "import sys, time\nend = time.time() + float(sys.argv[1])\nwhile time.time() < end: pass"


def competitor(limit_s: float) -> subprocess.Popen:
    """One CPU-bound process, ending by itself after limit_s at the latest."""
    return subprocess.Popen([sys.executable, "-c", SPIN, str(limit_s)])


def bare_loop(engine: Engine, prompt_tokens: list[int], n: int, threads: int) -> float:
    """Tokens/s of the minimal loop, on chatdb's own context (cleared first)."""
    model = engine.model
    model.clear()
    model.set_threads(threads, threads)  # chatdb sets its own again before its next turn
    batch = llama_cpp.llama_batch_init(512, 0, 1)
    params = llama_cpp.llama_sampler_chain_default_params()
    sampler = llama_cpp.llama_sampler_chain_init(params)
    llama_cpp.llama_sampler_chain_add(sampler, llama_cpp.llama_sampler_init_greedy())
    batch.n_tokens = len(prompt_tokens)
    for i, t in enumerate(prompt_tokens):
        batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = t, i, 1, False
        batch.seq_id[i][0] = 0
    batch.logits[len(prompt_tokens) - 1] = True
    llama_cpp.llama_decode(model.ctx, batch)
    pos, produced, first = len(prompt_tokens), 0, None
    while produced < n:
        token = llama_cpp.llama_sampler_sample(sampler, model.ctx, -1)
        produced += 1
        if first is None:
            first = time.perf_counter()
        batch.n_tokens = 1
        batch.token[0], batch.pos[0], batch.n_seq_id[0], batch.logits[0] = token, pos, 1, True
        batch.seq_id[0][0] = 0
        llama_cpp.llama_decode(model.ctx, batch)
        pos += 1
    elapsed = time.perf_counter() - first
    llama_cpp.llama_sampler_free(sampler)
    llama_cpp.llama_batch_free(batch)
    engine.cache.reset()
    return (n - 1) / elapsed


def chatdb_rate(engine: Engine, archive: Archive, n: int, draft: str) -> float:
    conv = archive.create_conversation("bench")
    engine.cache.reset()
    result = engine.reply(conv.id, PROMPT, sampling=SamplingSettings(temperature=0, max_tokens=n),
                          draft=draft)
    if result.completion_tokens < n:
        raise SystemExit(f"the answer ended after {result.completion_tokens} tokens; lower --tokens")
    return result.decode_tokens_per_s


def run_case(engine: Engine, archive: Archive, prompt, args, default_threads: int) -> dict:
    runs = {"bare llama.cpp loop": [], "chatdb, --draft off": [], "chatdb, --draft auto": []}
    same = {"chatdb, --draft off": [], "chatdb, --draft auto": []}   # each over its paired bare
    threads = []
    for _ in range(args.repeat):
        runs["bare llama.cpp loop"].append(bare_loop(engine, prompt, args.tokens, default_threads))
        for name, draft in (("chatdb, --draft off", "off"), ("chatdb, --draft auto", "auto")):
            rate = chatdb_rate(engine, archive, args.tokens, draft)
            used = engine.model.threads_decode
            runs[name].append(rate)
            same[name].append(rate / bare_loop(engine, prompt, args.tokens, used))
        threads.append(used)
    return {"runs": runs, "same": same, "threads": threads}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cases", default="idle,busy")
    parser.add_argument("--busy-limit", type=float, default=600, help="the competitor's longest life")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp, Archive.open(Path(tmp) / "b.db") as archive:
        engine = Engine.open(archive, use_kv=False)
        default_threads = engine.hardware.physical_cores   # llama.cpp's own default
        prompt = engine.prompts.piece_tokens([], {"role": "user", "content": PROMPT})
        for case in args.cases.split(","):
            spin = competitor(args.busy_limit) if case == "busy" else None
            load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
            try:
                results[case] = run_case(engine, archive, prompt, args, default_threads)
            finally:
                if spin is not None:
                    spin.kill()
                    spin.wait()
            results[case]["load"] = (load, os.getloadavg()[0] if hasattr(os, "getloadavg") else load)
        engine.close()
    print(f"\nDecode rate, {args.tokens} tokens, median of {args.repeat} alternating runs; bare loop "
          f"at llama.cpp's default {default_threads} threads, chatdb at its own choice")
    print(f"{'case':<5} {'loop':<22} {'tokens/s':>9} {'ratio':>7} {'/same':>7}   runs")
    for case, result in results.items():
        base = statistics.median(result["runs"]["bare llama.cpp loop"])
        for name, rates in result["runs"].items():
            median = statistics.median(rates)
            same = result["same"].get(name)
            paired = f"{statistics.median(same):>7.3f}" if same else f"{'-':>7}"
            print(f"{case:<5} {name:<22} {median:>9.1f} {median / base:>7.3f} {paired}   "
                  f"{', '.join(f'{x:.1f}' for x in rates)}")
        load = result["load"]
        print(f"{case:<5} chatdb's decode threads per round: {result['threads']}; load average "
              f"{load[0]:.2f} before, {load[1]:.2f} after (other work on this machine counts too)")
    print("targets: chatdb >= 2x the bare loop busy, >= 0.98x idle (draft off and auto); /same "
          "(chatdb over the bare loop on chatdb's threads, paired per round) >= 0.98x")


if __name__ == "__main__":
    main()
