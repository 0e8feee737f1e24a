"""Reopening a long chat in a new process: restore from the archive vs re-reading it.

For chats of about 1,000, 2,000 and 4,000 tokens, each reopened in a fresh
process and asked one more question, this prints the time to first token:

  chatdb      KV restored from the archive (chatdb ask -c)
  typed       the console's way: the chat is opened, its KV restored while the
              question is typed (TYPING seconds), then the question is asked
  re-read     --no-kv: the whole history prefilled again, as other local chat tools do
  diskcache   llama-cpp-python's own LlamaDiskCache (Llama.save_state/load_state on disk)

All run with the settings chatdb chooses for this machine (threads, flash
attention, GPU layers).

plus KV bytes stored per token against the raw state llama.cpp writes for
the chat, storage after ten real turns against the first turn's scaled by
the growth in tokens, and the storage of ten forks of one chain against that
chain alone. Medians of --repeat runs. --model (repeatable) runs the same
measurements for each model file, in the same run; typed and diskcache
render ChatML, so they are measured for the default model only.

Then a chat of twice the context (--long-ctx) continued for --turns turns,
each in a new process (`ask -c`: a restart every turn), against a chat of
half the context continued the same way: the median time to first token per
turn, after the first (which reads the window once), and their ratio.

    python bench/resume.py [--model PATH ...] [--sizes 1000,2000,4000] [--repeat 3] [--long-ctx 2048] [--turns 6]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from chatdb.archive import Archive  # noqa: E402

QUESTION = "In one sentence, what was the first thing I asked about?"
ASK = ("--temperature", "0", "--seed", "1", "--max-tokens", "8")
TYPING = 1.5   # seconds between opening a chat and sending the question
FILLER = ("The history of navigation runs from stars and coastlines to compasses, "
          "chronometers and satellites; each step let sailors go farther with less risk. ")


MODEL: "str | None" = None   # the model file under test (None: chatdb's default)


def _child_env() -> dict:
    """This environment, with the repository first on the path (packages installed with
    --target, as on a GPU machine, stay on it)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def chatdb(db, *args) -> dict:
    env = _child_env()
    args = ("--model", MODEL, *args) if MODEL else args
    proc = subprocess.run([sys.executable, "-m", "cli.main", "--db", str(db), "ask", "--json", *args],
                          capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    return json.loads(proc.stdout)


def tokens_per_turn() -> int:
    """Prompt tokens one question-and-answer pair of build_chat adds (with ChatML framing)."""
    from engine.llama.model import ContextConfig, Model
    from engine.llama.model_path import resolve_model_path
    model = Model(str(resolve_model_path(MODEL)), ContextConfig(n_ctx=512, n_batch=512, n_threads=1,
                                                                flash_attn=True))
    try:
        return len(model.tokenize(FILLER * 9)) + 16
    finally:
        model.close()


def build_chat(db, n_tokens: int) -> int:
    """A conversation of about n_tokens, its KV stored by one real turn."""
    with Archive.open(db) as archive:
        conv = archive.create_conversation(f"{n_tokens} tokens", system_prompt="You are helpful.")
        turns = max(1, round(n_tokens / tokens_per_turn()))
        for i in range(turns):
            archive.add_message(conv.id, "user", f"Question {i}: " + FILLER * 4)
            archive.add_message(conv.id, "assistant", FILLER * 5)
        conv_id = conv.id
    chatdb(db, "--conv", str(conv_id), *ASK, "Thanks.")
    return conv_id


def rendered_prompt(db, conv_id) -> str:
    """The chat as one prompt text (for LlamaDiskCache), via chatdb's own tokens."""
    with Archive.open(db) as archive:
        return "".join(_render(m) for m in archive.messages(conv_id))


def _render(m) -> str:
    return f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n"


def diskcache_worker(model: str, cache_dir: str, prompt: str) -> None:
    """Runs in its own process: one completion through LlamaDiskCache; prints TTFT in ms."""
    from llama_cpp import Llama, LlamaDiskCache

    from engine.llama import gguf_header
    from engine.machine import hardware, offload_plan, threads
    cfg = offload_plan.plan_offload(hardware.detect(), gguf_header.read_facts(model),  # chatdb's own settings
                            threads=threads.ThreadTuner().choice).config
    llm = Llama(model, n_ctx=cfg.n_ctx, flash_attn=cfg.flash_attn, n_gpu_layers=cfg.n_gpu_layers,
                n_threads=cfg.n_threads, n_threads_batch=cfg.n_threads_batch, verbose=False)
    llm.set_cache(LlamaDiskCache(cache_dir=cache_dir, capacity_bytes=8 << 30))
    started = time.perf_counter()
    stream = llm.create_completion(prompt, max_tokens=8, temperature=0, stream=True)
    next(stream)
    ttft = (time.perf_counter() - started) * 1000
    for _ in stream:
        pass
    print(json.dumps({"ttft_ms": ttft, "prompt_tokens": len(llm.tokenize(prompt.encode(), special=True))}))


def typed_worker(db: str, conv_id: int) -> None:
    """Runs in its own process: open the chat, type for TYPING s, ask; prints the turn's figures."""
    from engine.chat import Engine
    from engine.llama.sampling import SamplingSettings
    with Archive.open(db) as archive:
        engine = Engine.open(archive, MODEL, sampling=SamplingSettings(temperature=0, seed=1, max_tokens=8))
        engine.prepare(conv_id)          # what the console does as a chat opens
        time.sleep(TYPING)
        r = engine.reply(conv_id, QUESTION)
        engine.close()
    print(json.dumps({"ttft_ms": r.ttft_ms, "restore_ms": r.restore_ms, "ahead": r.restored_ahead}))


def typed(db, conv_id) -> dict:
    env = _child_env()
    proc = subprocess.run([sys.executable, __file__, "--typed-worker", str(db), str(conv_id)],
                          capture_output=True, text=True, check=True, env=env)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["ahead"], "the console's restore did not finish while typing"
    return result


def diskcache(model, cache_dir, prompt) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--diskcache-worker", model, cache_dir],
                          input=prompt, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(size: int, repeat: int, model: str, work: Path, baselines: bool) -> dict:
    db = work / f"chat{size}.db"
    conv_id = build_chat(db, size)
    history = rendered_prompt(db, conv_id)
    ask_prompt = history + f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n"
    cache_dir = str(work / f"diskcache{size}")
    if baselines:
        diskcache(model, cache_dir, history + "<|im_start|>assistant\n")  # fills the cache
    rows = {"chatdb": [], "typed": [], "re-read": [], "diskcache": []}
    restored = None
    for _ in range(repeat):
        # Each run starts again from the stored chat: fork its head, ask there.
        r = chatdb(db, "--conv", str(_fork_head(db, conv_id)), *ASK, QUESTION)
        rows["chatdb"].append(r["timings"]["ttft_ms"])
        restored = r["kv"]
        if baselines:
            rows["typed"].append(typed(db, _fork_head(db, conv_id))["ttft_ms"])
            rows["diskcache"].append(diskcache(model, cache_dir, ask_prompt)["ttft_ms"])
        rows["re-read"].append(chatdb(db, "--conv", str(_fork_head(db, conv_id)), "--no-kv", *ASK,
                                      QUESTION)["timings"]["ttft_ms"])
    with Archive.open(db) as archive:
        usage = archive.kv.usage()
        (stored_tokens,) = archive.conn.execute("SELECT sum(n_tokens) FROM kv_segments").fetchone()
    tokens = restored["restored_tokens"] + restored["computed_tokens"]
    return {"size": size, "tokens": tokens, "restored": restored,
            **{k: statistics.median(v) if v else float("nan") for k, v in rows.items()},
            "stored_per_raw": usage.stored_bytes / usage.raw_bytes,
            "stored_per_token": usage.stored_bytes / stored_tokens,
            "state_per_token": raw_state_bytes(tokens) / tokens, "db": db, "conv": conv_id}


def _fork_head(db, conv_id) -> int:
    with Archive.open(db) as archive:
        return archive.fork(archive.conversation(conv_id).head_id).id


def raw_state_bytes(n_tokens: int) -> int:
    """The size of the sequence state llama.cpp writes for a chat of n_tokens (this model),
    from the layout of a tiny state: an iSWA cache writes only its window's cells."""
    from engine.state import kvlayout
    from engine.llama.decoder import Decoder
    from engine.llama.model import ContextConfig, MemoryKind, Model
    from engine.llama.model_path import resolve_model_path
    model = Model(str(resolve_model_path(MODEL)), ContextConfig(n_ctx=512, n_batch=512, n_threads=1,
                                                                flash_attn=False))
    decoder = Decoder(model)
    try:
        decoder.prefill(model.tokenize(FILLER)[:8], 0)
        window = model.n_swa if model.memory_kind() == MemoryKind.ISWA else None
        layout = kvlayout.parse(model.get_state(), window)
    finally:
        decoder.close()
        model.close()
    dropped = n_tokens - min(n_tokens, window) if window else 0
    return layout.state_size(n_tokens) - dropped * (layout.part_bytes(1) + 12)


def turns_growth(work: Path, turns: int = 10) -> float:
    """Storage after `turns` real turns over storage after the first, per growth in tokens."""
    db = work / "turns.db"
    points = []
    for i in range(turns):
        chatdb(db, *(("-c",) if i else ()), *ASK, f"Turn {i}: " + FILLER * 3)
        with Archive.open(db) as archive:
            stored = archive.kv.usage().stored_bytes
            (tokens,) = archive.conn.execute("SELECT sum(n_tokens) FROM kv_segments").fetchone()
        points.append((stored, tokens))
    (s1, t1), (sn, tn) = points[0], points[-1]
    return (sn / s1) / (tn / t1)


def long_chat(work: Path, ctx: int, n_tokens: int, turns: int) -> dict:
    """Per-turn figures of `turns` questions, each in a new process, after a chat of n_tokens."""
    db = work / f"long{n_tokens}.db"
    with Archive.open(db) as archive:
        conv = archive.create_conversation(f"{n_tokens} tokens", system_prompt="You are helpful.")
        for i in range(max(1, round(n_tokens / tokens_per_turn()))):
            archive.add_message(conv.id, "user", f"Question {i}: " + FILLER * 4)
            archive.add_message(conv.id, "assistant", FILLER * 5)
    ttft, computed, restored, left_out = [], [], [], 0
    for i in range(turns):
        r = chatdb(db, "-c", "--ctx", str(ctx), *ASK, f"Turn {i}: one word?")
        ttft.append(r["timings"]["ttft_ms"])
        computed.append(r["kv"]["computed_tokens"])
        restored.append(r["kv"]["restored_tokens"])
        left_out = max(left_out, r["left_out_messages"])
    return {"tokens": n_tokens, "ttft": statistics.median(ttft[1:]), "first": ttft[0],
            "computed": statistics.median(computed[1:]), "left_out": left_out,
            "restored": statistics.median(restored[1:])}


def forks_storage(db: Path, conv_id: int) -> float:
    with Archive.open(db) as archive:
        one_chain = archive.kv.usage().stored_bytes
        head = archive.conversation(conv_id).head_id
    for i in range(10):
        with Archive.open(db) as archive:
            fork = archive.fork(head).id
        chatdb(db, "--conv", str(fork), *ASK, f"Fork {i}: one word?")
    with Archive.open(db) as archive:
        return archive.kv.usage().stored_bytes / one_chain


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--diskcache-worker":
        return diskcache_worker(sys.argv[2], sys.argv[3], sys.stdin.read())
    if len(sys.argv) > 1 and sys.argv[1] == "--typed-worker":
        return typed_worker(sys.argv[2], int(sys.argv[3]))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,2000,4000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--model", action="append", metavar="PATH",
                        help="a GGUF file to measure (repeatable; 'default' is chatdb's default model)")
    parser.add_argument("--long-ctx", type=int, default=2048)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--parts", default="resume,storage,long",
                        help="what to measure: resume (reopened vs re-read), storage "
                             "(forks, turns), long (a chat longer than the context)")
    args = parser.parse_args()
    args.parts = set(args.parts.split(","))
    for model in args.model or ["default"]:
        report(None if model == "default" else model, args)


def report(model_file: "str | None", args) -> None:
    global MODEL
    from engine.llama.model_path import resolve_model_path
    MODEL = model_file
    model = str(resolve_model_path(model_file))
    baselines = model_file is None
    with tempfile.TemporaryDirectory() as tmp:
        if "resume" in args.parts:
            results = [measure(int(s), args.repeat, model, Path(tmp), baselines)
                       for s in args.sizes.split(",")]
            print_resume(model, results, args.repeat, baselines)
        if "storage" in args.parts:
            # Fresh chain for the fork figure: the measurements above already forked it.
            fork_db = Path(tmp) / "forks.db"
            ratio = forks_storage(fork_db, build_chat(fork_db, 2000))
            growth = turns_growth(Path(tmp))
            print(f"Storage after 10 turns vs after the first, per growth in tokens: {growth:.3f}")
            print(f"Storage of ten forks of a 2,000-token chain vs the chain alone: {ratio:.3f}x")
        if "long" in args.parts:
            # Within: a chat about as long as the window a longer one keeps (between half
            # the room and all of it), so both restore as much and differ by the window alone.
            within = long_chat(Path(tmp), args.long_ctx, args.long_ctx * 3 // 4, args.turns)
            beyond = long_chat(Path(tmp), args.long_ctx, args.long_ctx * 2, args.turns)
            print_long(within, beyond, args)


def print_resume(model: str, results: list, repeat: int, baselines: bool) -> None:
    print(f"\n{Path(model).name}: time to first token after reopening a chat in a new process "
          f"(median of {repeat}, ms)")
    print(f"{'tokens':>7} {'chatdb':>8} {'typed':>7} {'re-read':>9} {'diskcache':>10} "
          f"{'vs re-read':>11} {'vs diskcache':>13} {'typed vs diskcache':>19} {'restored':>9} {'restore ms':>11}")
    for r in results:
        print(f"{r['tokens']:>7} {r['chatdb']:>8.1f} {r['typed']:>7.1f} {r['re-read']:>9.1f} "
              f"{r['diskcache']:>10.1f} {r['re-read'] / r['chatdb']:>10.1f}x "
              f"{r['diskcache'] / r['chatdb']:>12.1f}x {r['diskcache'] / r['typed']:>18.1f}x "
              f"{r['restored']['restored_tokens']:>9} {r['restored']['restore_ms']:>11.1f}")
    if baselines:
        print("typed: the console restores a chat as it opens; the first token then waits only "
              "for the question itself.")
    print("KV bytes stored per raw KV byte: " +
          ", ".join(f"{r['tokens']} tokens: {r['stored_per_raw']:.3f}" for r in results))
    print("KV bytes stored per token of the tree vs llama.cpp's state per token at that length: " +
          ", ".join(f"{r['tokens']} tokens: {r['stored_per_token']:.0f} vs {r['state_per_token']:.0f}"
                    for r in results))


def print_long(within: dict, beyond: dict, args) -> None:
    print(f"\nA chat longer than the context ({args.long_ctx} tokens), a new process every turn: "
          f"median of turns 2-{args.turns}")
    print(f"{'chat tokens':>12} {'left out':>9} {'first ttft':>11} {'ttft ms':>8} {'restored':>9} "
          f"{'computed':>9}")
    for r in (within, beyond):
        print(f"{r['tokens']:>12} {r['left_out']:>9} {r['first']:>11.1f} {r['ttft']:>8.1f} "
              f"{r['restored']:>9.0f} {r['computed']:>9.0f}")
    print(f"twice the context vs within it: {beyond['ttft'] / within['ttft']:.2f}x per-turn ttft, "
          f"{beyond['computed'] / max(1, within['computed']):.2f}x tokens computed (target: within 1.5x)")

if __name__ == "__main__":
    main()
