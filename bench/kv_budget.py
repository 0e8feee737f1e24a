"""The KV budget: what a bounded archive keeps for the chats people come back to, and q8_0.

Part 1 replays one seeded trace (bench/kv_trace.py: 40 chats of 300 to
3,000 tokens, then reopenings, most of them among the few chats in use, some
of old ones, each adding a question and an answer) on archives whose
budgets are 10%, 25% and 50% of what the unbounded archive stores at the
end, once with chatdb's rule (chatdb/kv/eviction.py: worth per byte, from
the ends of paths, partial KV) and once with plain LRU by conversation, and
on an unbounded archive, all in the same run. For each it prints:

  restored   tokens restored from the archive at the reopenings, as a share
             of what the unbounded archive restores
  TTFT       the first token of a reopening (restore, then compute the rest
             of the path and the question), median and p95 over sampled
             reopenings, against the unbounded archive's at the same ones
  file       the archive file and its log after the trace (and the most
             they took during it), against the budget plus all the archive
             holds besides KV (text, tokens, the search index)

Each chat and each reopening is computed once, through the real engine,
into a source archive; the replays then store those segments as the
engine's KV writer does (make room under the budget, then write, then count
the path as used, then give the freed pages back), so the rule and the
baseline see the same bytes. The first-token times are real: at a sampled
reopening, each archive's state is restored into the model and the rest
computed, the archives one after another at the same point of the trace.

Part 2 (bench/kv_types.py) compares the KV types on SmolLM2 and Gemma 3:
bytes stored per token, prefill and decode speed, and the quality against
f16.

    python bench/kv_budget.py [--quick] [--only budget|types] [--chats 40] [--events 120]
                              [--ttft-events 10] [--seed 1]

Slow on a small machine (the chats are about 70,000 tokens to compute):
hold the bench lock, `flock /tmp/bench.lock .venv/bin/python bench/kv_budget.py`.
--quick runs a small version of both parts (12 chats of 300 to 1,200 tokens).
"""

import argparse
import math
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from chatdb.archive import Archive  # noqa: E402
from chatdb.kv.budget import format_size  # noqa: E402
from chatdb.kv.report import file_sizes, report  # noqa: E402
from chatdb.kv.store import Encoded  # noqa: E402

from kv_trace import LRUByConversation, make_chats, make_trace  # noqa: E402

FRACTIONS = (0.10, 0.25, 0.50)
N_CTX = 8192
ROOM = 512        # tokens a chat keeps free in the context (an answer's)


@dataclass
class Op:
    chat: int
    messages: list            # (role, text) added by it
    reopening: bool = False


@dataclass
class Replay:
    name: str
    fraction: "float | None"   # of the unbounded archive's KV; None: unbounded
    rule: str                  # "worth" (chatdb's) or "lru"
    archive: Archive = None
    lru: "LRUByConversation | None" = None
    restored: int = 0
    ttft: list = field(default_factory=list)
    file_max: int = 0
    budget: "int | None" = None


def main() -> None:
    args = parse_args()
    if args.only in (None, "budget"):
        budget_part(args)
    if args.only in (None, "types"):
        from kv_types import types_part
        types_part(quick=args.quick)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small version of both parts")
    parser.add_argument("--only", choices=("budget", "types"))
    parser.add_argument("--chats", type=int)
    parser.add_argument("--events", type=int)
    parser.add_argument("--ttft-events", type=int)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, help="fixed threads (default: as chatdb chooses)")
    args = parser.parse_args()
    args.chats = args.chats or (12 if args.quick else 40)
    args.events = args.events or (40 if args.quick else 120)
    args.ttft_events = args.ttft_events or (6 if args.quick else 10)
    args.high = 1200 if args.quick else 3000
    return args


# -- part 1 -------------------------------------------------------------------------

def budget_part(args) -> None:
    from engine.chat import Engine

    work = Path(tempfile.mkdtemp(prefix="chatdb-kv-budget-"))
    source = Archive.open(work / "source.db")
    with source.transaction():
        source.kv_budget.set(None)
    engine = Engine.open(source, n_ctx=N_CTX, draft="off", threads=args.threads)
    try:
        rng = random.Random(args.seed)
        started = time.perf_counter()
        ops, trace_stats = build(engine, source, rng, args)
        print(f"computed {trace_stats} in {time.perf_counter() - started:.0f} s", flush=True)
        replays = replay_all(engine, source, ops, work, args)
        print_table(replays, trace_stats)
    finally:
        engine.close()
        source.close()


def build(engine, source, rng, args) -> "tuple[list[Op], str]":
    """Every chat, then every reopening, added to `source` and its KV computed once."""
    count = lambda text: len(engine.model.tokenize(text, special=False))
    chats = make_chats(rng, args.chats, 300, args.high, count)
    ops, conv_ids, lengths = [], [], []
    for i, chat in enumerate(chats):
        conv = source.create_conversation(f"chat {i}", system_prompt=chat.system)
        conv_ids.append(conv.id)
        messages = [m for q, a in chat.turns for m in (("user", q), ("assistant", a))]
        for role, content in messages:
            source.add_message(conv.id, role, content)
        ops.append(Op(i, [("system", chat.system)] + messages))
        lengths.append(compute(engine, source, conv.id))

    def fits(reopening) -> bool:
        grown = lengths[reopening.chat] + count(reopening.question) + count(reopening.answer) + 12
        if grown > N_CTX - ROOM:
            return False
        lengths[reopening.chat] = grown
        return True

    lengths_at_start = list(lengths)
    trace = make_trace(rng, len(chats), args.events, fits)
    for reopening in trace:
        conv = conv_ids[reopening.chat]
        source.add_message(conv, "user", reopening.question)
        source.add_message(conv, "assistant", reopening.answer)
        ops.append(Op(reopening.chat, [("user", reopening.question), ("assistant", reopening.answer)],
                      reopening=True))
        compute(engine, source, conv)
    engine.flush()
    first = lengths_at_start
    last = [compute_tokens(engine, source, c) for c in conv_ids]
    return ops, (f"{len(chats)} chats of {min(first):,} to {max(first):,} tokens ({max(last):,} "
                 f"the longest after its reopenings), {len(trace)} reopenings, seed {args.seed}")


def compute(engine, source, conv_id: int) -> int:
    """Compute and store the KV of the conversation's path (what it lacks); its tokens."""
    tokens = engine.prompts.path_tokens(source.messages(conv_id))
    engine.cache.acquire(tokens.flat(), tokens)
    engine.store_path_kv(tokens, engine.cache)
    return len(tokens.flat())


def compute_tokens(engine, source, conv_id: int) -> int:
    return len(engine.prompts.path_tokens(source.messages(conv_id)).flat())


def replay_all(engine, source, ops: list[Op], work: Path, args) -> list[Replay]:
    unbounded = report(source, source.kv_budget.get()).stored_bytes
    replays = [Replay("unbounded", None, "worth")]
    for fraction in FRACTIONS:
        replays += [Replay(f"{fraction:.0%} chatdb", fraction, "worth"),
                    Replay(f"{fraction:.0%} LRU", fraction, "lru", lru=LRUByConversation())]
    for r in replays:
        r.archive = Archive.open(work / f"{r.name.replace(' ', '-').replace('%', '')}.db")
        r.budget = None if r.fraction is None else int(r.fraction * unbounded)
        with r.archive.transaction():
            r.archive.kv_budget.set(r.budget)
    reopenings = [i for i, op in enumerate(ops) if op.reopening]
    sampled = set(random.Random(args.seed + 1).sample(reopenings[len(reopenings) // 8:],
                                                      min(args.ttft_events, len(reopenings))))
    conv_ids = {}
    for i, op in enumerate(ops):
        ids = None
        for r in replays:
            ids = add_messages(engine, source, r.archive, op, conv_ids)
        if op.reopening:
            before = ids[:-2]            # the path as it was when the chat was reopened
            for r in replays:
                r.restored += restorable(engine, r.archive, before)
            if i in sampled:
                order = replays[i % len(replays):] + replays[:i % len(replays)]
                for r in order:          # one after another at the same point of the trace
                    r.ttft.append(first_token_ms(engine, source, r.archive, ids[:-1]))
        for r in replays:
            store(engine, source, r, ids, conv_ids[op.chat])
        if i % 20 == 0:
            print(f"  replayed {i + 1} of {len(ops)}", flush=True)
    return replays


def add_messages(engine, source, archive, op: Op, conv_ids: dict) -> list[int]:
    """The op's messages, added in the order the source had them (so with the same ids),
    with their tokens; the path to the last."""
    with archive.transaction():
        if op.reopening:
            conv, messages = conv_ids[op.chat], op.messages
        else:
            conv = archive.create_conversation(f"chat {op.chat}", system_prompt=op.messages[0][1]).id
            conv_ids[op.chat], messages = conv, op.messages[1:]
        for role, content in messages:
            archive.add_message(conv, role, content)
        path = [m.id for m in archive.messages(conv)]
        for message_id in path:
            if archive.tokens.get(message_id, engine.tokenizer) is None:
                archive.tokens.put(message_id, engine.tokenizer, source.tokens.get(message_id, engine.tokenizer))
    return path


def restorable(engine, archive, path: list[int]) -> int:
    """Tokens of `path` the archive can restore."""
    point = archive.kv.deepest_restorable(path[-1], engine.fingerprint)
    if point is None:
        return 0
    through = path[: path.index(point.message_id) + 1]
    return sum(len(archive.tokens.get(m, engine.tokenizer)) for m in through)


def first_token_ms(engine, source, archive, path: list[int]) -> float:
    """Restore what `archive` holds of the path and compute the rest, to the question's last
    token's logits (as a turn does), with nothing of it in the model or in memory."""
    from engine.kv.cache import KVCache
    from engine.kv.memory_states import MemoryStates
    from engine.prompt.path_tokens import PathTokens

    tokens = PathTokens(path, [source.tokens.get(m, engine.tokenizer) for m in path])
    cache = KVCache(engine.cache.seq, archive, engine.cache.stored, True,
                    memory=MemoryStates(engine.layout))
    cache.reset()
    started = time.perf_counter()
    cache.acquire(tokens.flat(), tokens)
    ms = (time.perf_counter() - started) * 1000
    cache.reset()
    return ms


def store(engine, source, r: Replay, path: list[int], conv_id: int) -> None:
    """Store what the archive lacks of the path, as the KV writer does: room first (by the
    replay's rule), then each message's rows in path order while they fit."""
    fp, archive = engine.fingerprint, r.archive
    todo = [m for m in path if not archive.kv.has(m, fp)]
    segments = [source.kv.get(m, fp) for m in todo]
    sizes = [len(s.data) for s in segments]
    dropped = 0
    for i, segment in enumerate(segments):
        with archive.transaction():
            if r.rule == "worth":
                room = archive.kv_keeping.make_room(sum(sizes[i:]), set(path), engine.model.attention_span)
                dropped += room.dropped
                fits = room.fits(sizes[i])
            else:
                left, n = r.lru.make_room(archive, sum(sizes[i:]), conv_id) if r.budget is not None \
                    else (None, 0)
                dropped += n
                fits = left is None or sizes[i] <= left
            if not fits:
                break
            archive.kv.put_encoded(segment.message_id, fp, "rows", segment.n_tokens,
                                   Encoded(segment.codec, segment.raw_size, segment.checksum, segment.data))
    with archive.transaction():
        archive.kv_keeping.record_use(fp, path[-1])
    if r.lru is not None:
        r.lru.used(conv_id)
    archive.kv_keeping.after_store(dropped)
    r.file_max = max(r.file_max, sum(file_sizes(archive.db_path)))


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile (share in 0..1)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def print_table(replays: list[Replay], trace_stats: str) -> None:
    base = replays[0]
    final = report(base.archive, base.archive.kv_budget.get())
    print(f"\npart 1: a bounded archive over one reopening trace ({trace_stats}); "
          f"unbounded KV {format_size(final.stored_bytes)}")
    print(f"first token of the unbounded archive at the sampled reopenings: median "
          f"{statistics.median(base.ttft):,.0f} ms, p95 {percentile(base.ttft, 0.95):,.0f} ms\n")
    head = ("budget", "rule", "restored", "TTFT median", "TTFT p95", "file/(budget+rest)", "most")
    rows = []
    for r in replays[1:]:
        rest = report(r.archive, r.archive.kv_budget.get())
        allowed = r.budget + rest.rest_bytes
        rows.append((f"{r.fraction:.0%}", "chatdb (worth per byte)" if r.rule == "worth" else "LRU by conversation",
                     f"{r.restored / base.restored:.3f}",
                     f"{statistics.median(r.ttft) / statistics.median(base.ttft):.2f}x",
                     f"{percentile(r.ttft, 0.95) / percentile(base.ttft, 0.95):.2f}x",
                     f"{rest.file_bytes / allowed:.3f}", f"{r.file_max / allowed:.3f}"))
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    for row in [head] + rows:
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths)))
    print("\nchatdb's rule against LRU by conversation, restored tokens:")
    for fraction in FRACTIONS:
        ours, lru = [r for r in replays if r.fraction == fraction]
        print(f"  {fraction:.0%}: {ours.restored / max(1, lru.restored):.3f}x")
    for r in replays:
        r.archive.close()


if __name__ == "__main__":
    main()
