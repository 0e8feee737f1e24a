"""chatdb serve under load, against the baselines issue 13 names, in one run.

1. Aggregate decode tokens/s with 1, 2, 4, 8 concurrent clients (--tokens
   each): chatdb serve; the same requests sent to it one at a time; the bare
   batched loop on llama.cpp's low-level API in chatdb's own context, on
   the threads chatdb chose for that batch (bench/bare_batch.py: the
   limit); llama-cpp-python's server and llama.cpp's llama-server under
   the same load. N concurrent clients send their requests at once.
2. Time to first token for a --history-token conversation resent after a
   restart: chatdb against llama-cpp-python's server as it starts and with
   its disk cache (bench/serve_history.py).
3. The disk ten such conversations sharing a long prefix take.
4. Time to first token under 4 concurrent clients: p50, p95, and each
   client's against the same request alone.
5. Decode tokens/s of answers held to a JSON schema by a grammar against
   the same answers without one (bench/serve_grammar.py; target 0.9x).
6. Speculative decoding in the server: --draft auto against --draft off on
   an editing task and on prose, at 1 and 4 clients (bench/serve_drafting.py;
   targets 1.3x on editing at 1 client, never below 0.97x on prose).

Every configuration runs interleaved with its baseline, --repeat times; the
tables give medians, and ratios as the median of each repeat's own ratio.
The load average is printed, since other work on the machine moves every
figure.

llama-cpp-python's server needs packages chatdb does not; install them apart:
    .venv/bin/pip install --target /tmp/lcp-deps \\
        fastapi sse-starlette starlette-context pydantic-settings
llama-server, from the llama.cpp that llama-cpp-python 0.3.36 vendors:
    pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36
    tar xzf llama_cpp_python-0.3.36.tar.gz
    cd llama_cpp_python-0.3.36/vendor/llama.cpp && cmake -B build -DCMAKE_BUILD_TYPE=Release \\
        -DGGML_LLAMAFILE=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF \\
        && cmake --build build --target llama-server -j        # (add the Makefile's no-AMX flags on VMs)
Then:
    flock /tmp/bench.lock .venv/bin/python bench/serve.py --lcp-deps /tmp/lcp-deps \\
        --llama-server .../build/bin/llama-server
Without either, its columns say so. --quick is a shorter run; --smoke only checks that it runs.
"""

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bare_batch import PROMPTS, BareBatch  # noqa: E402
from serve_clients import (chatdb_server, chatdb_threads, concurrent, lcp_server,  # noqa: E402
                           llama_server, one_at_a_time, serial_rate, settle, together_rate)
from serve_grammar import grammar_against_plain  # noqa: E402
from serve_drafting import drafted_against_undrafted  # noqa: E402
from serve_history import disk_for_shared_prefix, resume_after_restart  # noqa: E402

from engine.llama.model_path import resolve_model_path  # noqa: E402
from engine.machine.threads import ThreadTuner  # noqa: E402

PRESETS = {"quick": dict(tokens=32, history=2000, repeat=1, rounds=2, draft_tokens=200),
           "smoke": dict(tokens=4, clients="1,2", history=300, repeat=1, rounds=1,
                         draft_tokens=8)}


def requests(n: int, tag: str) -> list:
    """n one-message chats; the tag keeps them apart from earlier ones in the archive."""
    return [[{"role": "user", "content": f"{PROMPTS[i % len(PROMPTS)]} ({tag}, client {i})"}]
            for i in range(n)]


def throughput(args, work: Path, model: str, tuner: ThreadTuner) -> None:
    counts = [int(c) for c in args.clients.split(",")]
    print(f"\n1. aggregate decode tokens/s, {args.tokens} tokens per client"
          f" (median of {args.repeat}; ratios: median of each repeat's own)")
    servers = {"chatdb": chatdb_server(work / "throughput.db", work, max(counts), args.threads)}
    if args.lcp_deps:
        servers["lcp"] = lcp_server(model, work, args.lcp_deps, _threads(tuner))
    if args.llama_server and not os.access(args.llama_server, os.X_OK):
        print(f"l-server: {args.llama_server} is not an executable file; not run")
        args.llama_server = None
    if args.llama_server:
        servers["llama-server"] = llama_server(args.llama_server, model, work, max(counts),
                                               _threads(tuner))
    bare = {n: BareBatch(model, n, tuner) for n in counts}
    rates = {n: {k: [] for k in ["bare", "serial", *servers]} for n in counts}
    threads = {n: [] for n in counts}
    chatdb = servers["chatdb"].base
    try:
        for r in range(args.repeat):
            for n in counts:   # each configuration next to its baselines, every repeat
                for name, server in servers.items():
                    settle(server.base)
                    timed = concurrent(server.base, requests(n, f"{name} {r}"), args.tokens)
                    rates[n][name].append(together_rate(timed))
                # The limit, on the threads chatdb chose for that batch.
                threads[n].append(bare[n].threads(chatdb_threads(chatdb)))
                rates[n]["bare"].append(bare[n].run(args.tokens))
                settle(chatdb)
                rates[n]["serial"].append(serial_rate(one_at_a_time(
                    chatdb, requests(n, f"serial {r}"), args.tokens)))
        batched = httpx.get(chatdb + "/health").json().get("most_sequences")
    finally:
        for server in servers.values():
            server.stop()
        for loop in bare.values():
            loop.close()
    _throughput_table(rates, threads, args)
    print("chatdb's /health: " + (f"at most {batched} sequences were decoded in one batch"
                                  if batched else "no most_sequences (a server answering one at a time)"))


COLUMNS = [("bare", "bare"), ("chatdb", "chatdb"), ("serial", "serial"), ("lcp", "lcp"),
           ("llama-server", "l-server")]


def _throughput_table(rates, threads, args) -> None:
    print(f"{'clients':>7} {'threads':>7} " + " ".join(f"{label:>8}" for _, label in COLUMNS)
          + " | " + " ".join(f"{'/' + label:>9}" for key, label in COLUMNS if key != "chatdb"))
    for n, row in rates.items():
        med = {key: statistics.median(row[key]) if row.get(key) else None for key, _ in COLUMNS}
        ratios = [_paired(row["chatdb"], row.get(key)) for key, _ in COLUMNS if key != "chatdb"]
        used = "/".join(str(t) for t in statistics.median_low(threads[n]))
        print(f"{n:>7} {used:>7} " + " ".join(_num(med[key], 8) for key, _ in COLUMNS)
              + " | " + " ".join(f"{_ratio(r):>9}" for r in ratios))
    print("chatdb/bare in each repeat: " + ";  ".join(
        f"{n}: " + " ".join(f"{c / b:.2f}" for c, b in zip(row["chatdb"], row["bare"]))
        for n, row in rates.items()))
    print("targets: chatdb/bare >= 0.9x at every concurrency; chatdb/serial >= 1.3x at 4 clients."
          "\nthreads: decode/batch threads chatdb chose for the batch (from its /health); the"
          " bare loop ran on the same;\nserial: the same requests sent to chatdb one at a time.")
    if not args.lcp_deps:
        print("lcp: not run (give --lcp-deps DIR; see this file's docstring)")
    if not args.llama_server:
        print("l-server: not run (give --llama-server PATH; how to build it: this file's docstring)")


def _paired(ours, theirs) -> "float | None":
    """The median of the repeats' ratios: each repeat's pair ran back to back, so a
    machine that changes speed between repeats moves both alike."""
    if not ours or not theirs:
        return None
    return statistics.median(a / b for a, b in zip(ours, theirs) if b)


def ttft_under_load(args, work: Path) -> None:
    print(f"\n4. time to first token, 4 concurrent clients against each alone ({args.rounds} rounds)")
    loaded, alone = {i: [] for i in range(4)}, {i: [] for i in range(4)}
    threads = {"alone": set(), "together": set()}
    with chatdb_server(work / "ttft.db", work, 4, args.threads) as server:
        for r in range(args.rounds):
            order = [("alone", alone), ("together", loaded)]
            for mode, into in order if r % 2 == 0 else order[::-1]:
                settle(server.base)
                send = one_at_a_time if mode == "alone" else concurrent
                for i, timed in enumerate(send(server.base, requests(4, f"{mode} {r}"), args.tokens)):
                    into[i].append(timed.ttft)
                threads[mode].add("/".join(map(str, chatdb_threads(server.base))))
    every_loaded = [t for v in loaded.values() for t in v]
    every_alone = [t for v in alone.values() for t in v]
    print(f"{'':<12} {'p50 ms':>8} {'p95 ms':>8}")
    for name, values in (("4 clients", every_loaded), ("alone", every_alone)):
        print(f"{name:<12} {_pct(values, 50) * 1000:>8.0f} {_pct(values, 95) * 1000:>8.0f}")
    print("threads (decode/batch) chatdb chose: " + ";  ".join(
        f"{mode} {', '.join(sorted(used))}" for mode, used in threads.items()))
    worst = [statistics.median(loaded[i]) / statistics.median(alone[i]) for i in range(4)]
    print("each client's median ttft under load / alone: " + "  ".join(f"{w:.2f}x" for w in worst)
          + f"  (target: none over 3x: {'met' if max(worst) <= 3 else 'MISSED'})")
    each = [statistics.median(alone[i]) for i in range(4)]
    print("the four alone ttfts summed / each alone:       "
          + "  ".join(f"{sum(each) / e:.2f}x" for e in each)
          + "  (the last of four waits about this where a prompt token costs as much in a"
            " batch as alone)")


def _pct(values, q: int) -> float:
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def _threads(tuner: ThreadTuner) -> "tuple[int, int]":
    """chatdb's thread choice now, for the servers given threads by flag."""
    tuner.recheck()
    return tuner.choice.decode, tuner.choice.batch


def _num(value, width: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.1f}"


def _ratio(value) -> str:
    return "-" if not value else f"{value:.2f}x"


def _load() -> str:
    return "load average %.1f %.1f %.1f (1, 5, 15 min) on %d CPUs" % (*os.getloadavg(), os.cpu_count())


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=128, help="tokens per answer (default 128)")
    parser.add_argument("--clients", default="1,2,4,8", help="concurrencies (default 1,2,4,8)")
    parser.add_argument("--history", type=int, default=4000, help="long chat's tokens (default 4000)")
    parser.add_argument("--repeat", type=int, default=3, help="repeats of sections 1 and 2 (default 3)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of section 4 (default 3)")
    parser.add_argument("--threads", type=int, help="fix every server's threads (default: chatdb's choice)")
    parser.add_argument("--lcp-deps", metavar="DIR", help="llama-cpp-python server's packages")
    parser.add_argument("--llama-server", metavar="PATH", help="a llama-server binary")
    parser.add_argument("--draft-tokens", type=int, default=400,
                        help="tokens per answer in section 6 (default 400: the whole edited file)")
    parser.add_argument("--only", default="123456", help="sections to run (default 123456)")
    parser.add_argument("--model", help="the model (default: the default model)")
    for name, preset in PRESETS.items():
        parser.add_argument(f"--{name}", action="store_true", help=f"preset: {preset}")
    args = parser.parse_args(argv)
    for name, preset in PRESETS.items():
        if getattr(args, name):
            parser.set_defaults(**preset)
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse(argv)
    model = str(Path(resolve_model_path(args.model)).resolve())   # the servers run elsewhere
    tuner = ThreadTuner(args.threads)
    print(f"chatdb serve bench: {Path(model).name}; {_load()}")
    with tempfile.TemporaryDirectory(prefix="chatdb-bench-serve-") as tmp:
        work = Path(tmp)
        sections = {"1": lambda: throughput(args, work, model, tuner),
                    "2": lambda: resume_after_restart(args, work, model, lambda: _threads(tuner)),
                    "3": lambda: disk_for_shared_prefix(args, work, model, lambda: _threads(tuner)),
                    "4": lambda: ttft_under_load(args, work),
                    "5": lambda: grammar_against_plain(args, work, model),
                    "6": lambda: drafted_against_undrafted(args, work, model)}
        for key in args.only:
            sections[key]()
            print(_load())


if __name__ == "__main__":
    main()
