"""bench/serve.py part 6: speculative decoding inside chatdb serve, drafted against undrafted.

Two servers on the same model, `--draft auto` (the archive, then prompt lookup)
and `--draft off`, each with --parallel 4, get the same requests: an editing
task (a client sends a file and asks for it back with one change: the answer
repeats most of the file, which lookup guesses, and an earlier request, the
same file with another rename, sent to both servers before the timed ones, is
in the archive) and prose (little to copy: drafting must cost nothing), from 1
client and from 4 at once. Greedy, so both servers write the
same text (checked: `same`). The rate is decoded tokens over the window from
the first client's first token to the last one's last (together_rate); each
repeat runs both servers back to back, alternating which goes first, and the
ratio is the median of each repeat's own. Targets: editing 1.3x or better
at 1 client, prose never below 0.97x (at 4 clients too: a shared pass drafts
only where it pays beside the others).
"""

import statistics
import sys
from pathlib import Path

from serve_clients import chatdb_server, concurrent, settle, together_rate

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from speculative_tasks import TASKS  # noqa: E402
from speculative_archive import STORIES  # noqa: E402

CLIENTS = (1, 4)
# Sent to both servers before the timed requests: the same file, another rename.
EARLIER = TASKS["editing"][0][1].replace("load_config to read_config", "save_config to write_config")
TASK_NAMES = ("editing", "prose")


def conversations(task: str, n: int, tag: str, repeat: int = 0) -> list:
    """n copies of the task, each its own new chat (the tag keeps them apart in the archive);
    prose asks each client of each repeat for another story, so that the archive holds
    nothing like it."""
    if task == "prose":
        first = repeat * sum(CLIENTS) + sum(CLIENTS[:CLIENTS.index(n)])
        return [[{"role": "user", "content": f"Write a short story about "
                                             f"{STORIES[(first + i) % len(STORIES)]}."}]
                for i in range(n)]
    turns = TASKS[task]
    return [[{"role": role, "content": text + (f"\n\n({tag}, client {i})" if j == len(turns) - 1
                                               else "")}
             for j, (role, text) in enumerate(turns)] for i in range(n)]


def drafted_against_undrafted(args, work: Path, model: str) -> None:
    tokens = args.draft_tokens
    print(f"\n6. chatdb serve drafting (--draft auto) against not (--draft off), greedy, up to "
          f"{tokens} tokens per answer, --parallel 4 (median of {args.repeat}; ratio: median of "
          f"each repeat's own)")
    # No background indexing: the idle server's embedding of the answers just written
    # would run beside the other's measured ones.
    servers = {mode: chatdb_server(work / f"{mode}.db", work, 4, args.threads,
                                   ["--model", model, "--draft", mode, "--embed-model", "off"])
               for mode in ("auto", "off")}
    for server in servers.values():   # a similar earlier request: what the archive drafts from
        concurrent(server.base, [[{"role": "user", "content": EARLIER}]], tokens)
    rates = {(task, n): {"auto": [], "off": []} for task in TASK_NAMES for n in CLIENTS}
    same = {key: True for key in rates}
    drafting = {key: [] for key in rates}   # each auto answer's chatdb.speculative, and its tokens
    try:
        for r in range(args.repeat):
            for (task, n), row in rates.items():
                order = ["auto", "off"] if r % 2 == 0 else ["off", "auto"]
                texts = {}
                for mode in order:
                    settle(servers[mode].base)
                    timed = concurrent(servers[mode].base, conversations(task, n, f"{task} {r}", r),
                                       tokens)
                    row[mode].append(together_rate(timed))
                    texts[mode] = [t.text for t in timed]
                    if mode == "auto":
                        drafting[(task, n)] += [(t.speculative, t.tokens) for t in timed]
                same[(task, n)] &= texts["auto"] == texts["off"]
    finally:
        for server in servers.values():
            server.stop()
    print(f"{'task':<8} {'clients':>7} {'off tok/s':>10} {'auto tok/s':>11} {'auto/off':>9}  same  "
          f"each repeat's auto/off")
    for (task, n), row in rates.items():
        ratios = [a / b for a, b in zip(row["auto"], row["off"]) if b]
        print(f"{task:<8} {n:>7} {statistics.median(row['off']):>10.1f} "
              f"{statistics.median(row['auto']):>11.1f} {statistics.median(ratios):>8.2f}x  "
              f"{'yes' if same[(task, n)] else 'NO ':<4}  "
              + " ".join(f"{x:.2f}" for x in ratios))
    print("targets: editing >= 1.3x at 1 client; prose never below 0.97x; same: yes everywhere "
          "where the model computes a token alike in any batch (SmolLM2 does, Gemma 3 270M not)")
    _what_drafting_did(drafting)


def _what_drafting_did(drafting) -> None:
    """Per answer of --draft auto: guesses verified and accepted, and tokens per pass of
    the target model (1.0: no guess paid), so that a ratio tells the policy from noise."""
    print(f"{'task':<8} {'clients':>7} {'drafted':>8} {'accepted':>9} {'rate':>5} {'tok/pass':>9} "
          f"{'k':>3}  (--draft auto, median per answer; k: the length the policy ended at)")
    for (task, n), answers in drafting.items():
        figures = [(s["drafted"], s["accepted"], tokens / max(1, s["target_forwards"]),
                    s["draft_length"]) for s, tokens in answers if s]
        if not figures:
            print(f"{task:<8} {n:>7}  (no chatdb.speculative in the answers)")
            continue
        drafted, accepted, per_pass, k = (statistics.median(column) for column in zip(*figures))
        rate = sum(f[1] for f in figures) / max(1, sum(f[0] for f in figures))
        print(f"{task:<8} {n:>7} {drafted:>8.0f} {accepted:>9.0f} {rate:>5.2f} {per_pass:>9.2f} {k:>3.0f}")
