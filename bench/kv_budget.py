"""The KV budget: what a bounded archive keeps for the chats people come back to, and q8_0.

Part 1 replays seeded traces (bench/kv_trace.py: 40 chats of 300 to 3,000
tokens, then 120 reopenings, most of them among the few chats in use, some
of old ones, each adding a question and an answer; three traces over the
same chats) on archives whose budgets are 10%, 25% and 50% of what the
unbounded archive stores at the end, once with chatdb's rule
(chatdb/kv/eviction.py: worth per byte, from the ends of paths, partial KV)
and once with plain LRU by conversation, and on an unbounded archive, all
in the same run. For each it prints, over all the traces:

  restored   tokens restored from the archive at the reopenings, as a share
             of what the unbounded archive restores
  TTFT       the first token of a reopening (restore, then compute the rest
             of the path and the question), median and p95 over sampled
             reopenings, against the unbounded archive's at the same ones
  file       the archive file and its log after the trace (and the most
             they took during it), against the budget plus all the archive
             holds besides KV (text, tokens, the search index)

Each chat and each reopening is computed once, through the real engine,
into a source archive (a trace after the first on forks of the chats, so
each starts from the same chats; --work DIR keeps it, and a later run with
the same DIR replays it without computing anything); the replays then store those segments as the
engine's KV writer does (make room under the budget, then write, then count
the path as used, then give the freed pages back), so the rule and the
baseline see the same bytes. The first-token times are real: at a sampled
reopening, each archive's state is restored into the model and the rest
computed, the archives one after another at the same point of the trace.

Part 2 (bench/kv_types.py) compares the KV types on SmolLM2 and Gemma 3:
bytes stored per token, prefill and decode speed, and the quality against
f16.

    python bench/kv_budget.py [--quick] [--only budget|types] [--chats 40] [--longest 3000]
                              [--events 120] [--traces 3] [--ttft-events 6] [--seed 1] [--work DIR]

Slow on a small machine (the chats are about 70,000 tokens to compute):
hold the bench lock, `flock /tmp/cpu.lock .venv/bin/python bench/kv_budget.py`; a shorter
run: --longest 1500 --traces 2 --events 80.
--quick runs a small version of both parts (12 chats of 300 to 1,200 tokens).
"""

import argparse
import json
import math
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from chatdb.archive import Archive  # noqa: E402
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
    source_ids: list          # the same messages' ids in the source archive
    reopening: bool = False


@dataclass
class Replay:
    name: str
    fraction: "float | None"   # of the unbounded archive's KV; None: unbounded
    rule: str                  # "worth" (chatdb's) or "lru"
    archive: Archive = None
    lru: "LRUByConversation | None" = None
    budget: "int | None" = None
    restored: int = 0          # summed over the traces, as the rest
    ttft: list = field(default_factory=list)
    file_ratio: float = 0.0    # the file after a trace against budget + rest, the worst trace's
    file_max_ratio: float = 0.0   # the most it took during one, against the same
    file_max: int = 0


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
    parser.add_argument("--events", type=int, help="reopenings in each trace")
    parser.add_argument("--traces", type=int, help="seeded traces over the same chats")
    parser.add_argument("--ttft-events", type=int, help="reopenings timed in each trace")
    parser.add_argument("--longest", type=int, help="the most tokens a chat starts with (3,000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, help="fixed threads (default: as chatdb chooses)")
    parser.add_argument("--work", type=Path, metavar="DIR",
                        help="keep the computed chats here, and use them if already there")
    args = parser.parse_args()
    args.chats = args.chats or (12 if args.quick else 40)
    args.events = args.events or (40 if args.quick else 120)
    args.traces = args.traces or (1 if args.quick else 3)
    args.ttft_events = args.ttft_events or (6 if args.quick else 6)
    args.high = args.longest or (1200 if args.quick else 3000)
    return args


# -- part 1 -------------------------------------------------------------------------

def budget_part(args) -> None:
    from engine.chat import Engine

    work = args.work or Path(tempfile.mkdtemp(prefix="chatdb-kv-budget-"))
    work.mkdir(parents=True, exist_ok=True)
    source = Archive.open(work / "source.db")
    with source.transaction():
        source.kv_budget.set(None)
    engine = Engine.open(source, n_ctx=N_CTX, draft="off", threads=args.threads)
    try:
        started = time.perf_counter()
        plan = work / "plan.json"
        if plan.exists():
            chats, traces, stats = load_plan(plan)
        else:
            chats, traces, stats = build(engine, source, args)
            save_plan(plan, chats, traces, stats)
        print(f"{stats} ({time.perf_counter() - started:.0f} s to compute)", flush=True)
        replays = [Replay("unbounded", None, "worth")]
        for fraction in FRACTIONS:
            replays += [Replay(f"{fraction:.0%} chatdb", fraction, "worth"),
                        Replay(f"{fraction:.0%} LRU", fraction, "lru")]
        for t, trace in enumerate(traces):
            replay_trace(engine, source, chats + trace, work, replays, args, t)
            print(f"  trace {t + 1} of {len(traces)} replayed", flush=True)
        print_table(replays, stats)
    finally:
        engine.close()
        source.close()
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


def build(engine, source, args) -> "tuple[list[Op], list[list[Op]], str]":
    """Every chat, then each trace's reopenings (a trace after the first on forks of the
    chats, so that each starts from the same chats), added to `source` and computed once."""
    rng = random.Random(args.seed)
    count = lambda text: len(engine.model.tokenize(text, special=False))
    chats = make_chats(rng, args.chats, 300, args.high, count)
    ops, heads, lengths = [], [], []
    for i, chat in enumerate(chats):
        conv = source.create_conversation(f"chat {i}", system_prompt=chat.system)
        messages = [m for q, a in chat.turns for m in (("user", q), ("assistant", a))]
        ids = [source.messages(conv.id)[0].id] + [source.add_message(conv.id, role, content).id
                                                   for role, content in messages]
        ops.append(Op(i, [("system", chat.system)] + messages, ids))
        heads.append(ids[-1])
        lengths.append(compute(engine, source, conv.id))
    traces, longest = [], max(lengths)
    for t in range(args.traces):
        grown = list(lengths)

        def fits(reopening) -> bool:
            more = grown[reopening.chat] + count(reopening.question) + count(reopening.answer) + 12
            if more > N_CTX - ROOM:
                return False
            grown[reopening.chat] = more
            return True

        trace = make_trace(random.Random(args.seed + 1000 * (t + 1)), len(chats), args.events, fits)
        convs = {}   # chat -> this trace's conversation (a fork of the chat from its first head)
        trace_ops = []
        for reopening in trace:
            if reopening.chat not in convs:
                convs[reopening.chat] = source.fork(heads[reopening.chat], title=f"trace {t}").id
            conv = convs[reopening.chat]
            ids = [source.add_message(conv, "user", reopening.question).id,
                   source.add_message(conv, "assistant", reopening.answer).id]
            trace_ops.append(Op(reopening.chat, [("user", reopening.question), ("assistant", reopening.answer)],
                                ids, reopening=True))
            longest = max(longest, compute(engine, source, conv))
        traces.append(trace_ops)
    engine.flush()
    stats = (f"{len(chats)} chats of {min(lengths):,} to {max(lengths):,} tokens ({longest:,} the "
             f"longest after its reopenings), {len(traces)} traces of {args.events} reopenings, "
             f"seed {args.seed}")
    return ops, traces, stats


def save_plan(path: Path, chats, traces, stats: str) -> None:
    as_list = lambda ops: [asdict(op) for op in ops]
    path.write_text(json.dumps({"chats": as_list(chats), "traces": [as_list(t) for t in traces],
                                "stats": stats}))


def load_plan(path: Path):
    plan = json.loads(path.read_text())
    ops = lambda items: [Op(**item) for item in items]
    return ops(plan["chats"]), [ops(t) for t in plan["traces"]], plan["stats"]


def compute(engine, source, conv_id: int) -> int:
    """Compute and store the KV of the conversation's path (what it lacks), as `chatdb warm`
    does (a restore of what the source holds, then the rest read and stored); its tokens."""
    from engine.batching.warming import Warmer

    report = Warmer(engine, source).warm([conv_id])
    if report.too_long or report.over_budget:
        raise SystemExit(f"chat {conv_id} not stored: too long for the context")
    return len(engine.prompts.path_tokens(source.messages(conv_id)).flat())


SEGMENT_SIZES = """
SELECT k.message_id, length(k.data) + coalesce(length(s.data), 0) FROM kv_segments k
LEFT JOIN kv_shared_rows s ON s.id = k.shared_id WHERE k.fingerprint = ?"""


def replay_trace(engine, source, ops: list[Op], work: Path, replays: list[Replay], args, t: int) -> None:
    """One trace replayed on fresh archives, one per replay, in step."""
    fp = engine.fingerprint
    sizes = source.conn.execute(SEGMENT_SIZES, (fp,)).fetchall()
    sizes = dict(sizes)
    unbounded = sum(sizes[m] for op in ops for m in op.source_ids)   # all it stores at the end
    for r in replays:
        path = work / f"{r.name.replace(' ', '-').replace('%', '')}.db"
        for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            leftover.unlink(missing_ok=True)
        r.archive = Archive.open(path)
        r.budget = None if r.fraction is None else int(r.fraction * unbounded)
        r.lru = LRUByConversation() if r.rule == "lru" else None
        with r.archive.transaction():
            r.archive.kv_budget.set(r.budget)
    reopenings = [i for i, op in enumerate(ops) if op.reopening]
    timed = set(random.Random(args.seed + t).sample(reopenings[len(reopenings) // 8:],
                                                    min(args.ttft_events, len(reopenings))))
    to_source, conv_ids = {}, {}
    for i, op in enumerate(ops):
        ids = None
        for r in replays:   # the same ids in each: they are built alike
            ids = add_messages(engine, source, r.archive, op, conv_ids, to_source)
        if op.reopening:
            before = ids[:-2]            # the path as it was when the chat was reopened
            for r in replays:
                r.restored += restorable(engine, r.archive, before)
            if i in timed:
                order = replays[i % len(replays):] + replays[:i % len(replays)]
                for r in order:          # one after another at the same point of the trace
                    r.ttft.append(first_token_ms(engine, source, r.archive, ids[:-1], to_source))
        for r in replays:
            store(engine, source, r, ids, conv_ids[op.chat], to_source)
    for r in replays:
        if r.budget is not None:
            rest = report(r.archive, r.archive.kv_budget.get())
            r.file_ratio = max(r.file_ratio, rest.file_bytes / (r.budget + rest.rest_bytes))
            r.file_max_ratio = max(r.file_max_ratio, r.file_max / (r.budget + rest.rest_bytes))
        r.file_max = 0
        r.archive.close()


def add_messages(engine, source, archive, op: Op, conv_ids: dict, to_source: dict) -> list[int]:
    """The op's messages, with their tokens; the path to the last. `to_source` learns which
    source message each is."""
    with archive.transaction():
        if op.reopening:
            conv, messages = conv_ids[op.chat], op.messages
            ids = []
        else:
            conv = archive.create_conversation(f"chat {op.chat}", system_prompt=op.messages[0][1]).id
            conv_ids[op.chat], messages = conv, op.messages[1:]
            ids = [archive.messages(conv)[0].id]
        ids += [archive.add_message(conv, role, content).id for role, content in messages]
        to_source.update(zip(ids, op.source_ids))
        path = [m.id for m in archive.messages(conv)]
        for message_id in ids:
            archive.tokens.put(message_id, engine.tokenizer,
                               source.tokens.get(to_source[message_id], engine.tokenizer))
    return path


def restorable(engine, archive, path: list[int]) -> int:
    """Tokens of `path` the archive can restore."""
    point = archive.kv.deepest_restorable(path[-1], engine.fingerprint)
    if point is None:
        return 0
    through = path[: path.index(point.message_id) + 1]
    return sum(len(archive.tokens.get(m, engine.tokenizer)) for m in through)


def first_token_ms(engine, source, archive, path: list[int], to_source: dict) -> float:
    """Restore what `archive` holds of the path and compute the rest, to the question's last
    token's logits, as a turn's slot does (KVCache.restore, then the rest prefilled), with
    nothing of it in the model or in memory."""
    from engine.kv.cache import KVCache
    from engine.kv.memory_states import MemoryStates
    from engine.prompt.path_tokens import PathTokens

    tokens = PathTokens(path, [source.tokens.get(to_source[m], engine.tokenizer) for m in path])
    cache = KVCache(engine.cache.seq, archive, engine.cache.stored, True, warn=refuse,
                    memory=MemoryStates(engine.layout))
    cache.reset()
    target = tokens.flat()
    started = time.perf_counter()
    cache.restore(target, tokens)
    cache.follow(target)
    ms = (time.perf_counter() - started) * 1000
    cache.reset()
    return ms


def refuse(message: str):
    """A replayed archive must restore what it stores: a refusal is the bench's fault."""
    raise SystemExit(f"bench/kv_budget.py: a replayed archive's restore failed: {message}")


def store(engine, source, r: Replay, path: list[int], conv_id: int, to_source: dict) -> None:
    """Store what the archive lacks of the path, as the KV writer does: room first (by the
    replay's rule), then each message's rows in path order while they fit; then the path
    counts as used, and the disk goes back."""
    fp, archive = engine.fingerprint, r.archive
    todo = [m for m in path if not archive.kv.has(m, fp)]
    segments = [source.kv.get(to_source[m], fp) for m in todo]
    sizes = [len(s.data) for s in segments]   # (a shared run's few rows besides)
    dropped = 0
    for i, (message_id, segment) in enumerate(zip(todo, segments)):
        with archive.transaction():
            if r.rule == "worth":
                room = archive.kv_keeping.make_room(sum(sizes[i:]), set(path), engine.model.attention_span)
                dropped += room.dropped
                fits = room.fits(sizes[i])
            else:
                left, n = r.lru.make_room(archive, sum(sizes[i:]), conv_id)
                dropped += n
                fits = sizes[i] <= left
            if not fits:
                break
            archive.kv.put_encoded(message_id, fp, "rows", segment.n_tokens,
                                   Encoded(segment.codec, segment.raw_size, segment.checksum, segment.data),
                                   shared_id=copy_shared_run(source, archive, to_source[message_id], fp))
    with archive.transaction():
        archive.kv_keeping.record_use(fp, path[-1])
    if r.lru is not None:
        r.lru.used(conv_id)
    archive.kv_keeping.after_store(dropped)
    r.file_max = max(r.file_max, sum(file_sizes(archive.db_path)))


SHARED_RUN = """
SELECT s.id, s.digest FROM kv_segments k JOIN kv_shared_rows s ON s.id = k.shared_id
WHERE k.message_id = ? AND k.fingerprint = ? AND k.kind = 'rows'"""


def copy_shared_run(source, archive, source_id: int, fp: str) -> "int | None":
    """The shared run (row_sharing.py) the source segment begins with, stored in `archive`
    too; its id there (None: the segment holds all its rows)."""
    row = source.conn.execute(SHARED_RUN, (source_id, fp)).fetchone()
    if row is None:
        return None
    run = source.kv.get_shared(row[0])
    shared_id, _ = archive.kv.put_shared(fp, row[1], run.n_tokens,
                                         Encoded(run.codec, run.raw_size, run.checksum, run.data))
    return shared_id


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile (share in 0..1)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def print_table(replays: list[Replay], stats: str) -> None:
    base = replays[0]
    print(f"\npart 1: a bounded archive over seeded reopening traces ({stats})")
    print(f"first token of the unbounded archive at the timed reopenings ({len(base.ttft)}): median "
          f"{statistics.median(base.ttft):,.0f} ms, p95 {percentile(base.ttft, 0.95):,.0f} ms\n")
    head = ("budget", "rule", "restored", "TTFT median", "TTFT p95", "file/(budget+rest)", "at most")
    rows = []
    for r in replays[1:]:
        rows.append((f"{r.fraction:.0%}", "chatdb (worth per byte)" if r.rule == "worth" else "LRU by conversation",
                     f"{r.restored / base.restored:.3f}",
                     f"{statistics.median(r.ttft) / statistics.median(base.ttft):.2f}x",
                     f"{percentile(r.ttft, 0.95) / percentile(base.ttft, 0.95):.2f}x",
                     f"{r.file_ratio:.3f}", f"{r.file_max_ratio:.3f}"))
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    for row in [head] + rows:
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths)))
    print("\nrestored tokens, chatdb's rule against LRU by conversation: " + ", ".join(
        f"{f:.0%} {ours.restored / max(1, lru.restored):.3f}x"
        for f in FRACTIONS for ours, lru in [[r for r in replays if r.fraction == f]]))


if __name__ == "__main__":
    main()
