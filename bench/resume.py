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

plus KV bytes stored per token against raw KV bytes, and the storage of ten
forks of one chain against that chain alone. Medians of --repeat runs.

    python bench/resume.py [--sizes 1000,2000,4000] [--repeat 3]
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


def chatdb(db, *args) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "cli.main", "--db", str(db), "ask", "--json", *args],
                          capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    return json.loads(proc.stdout)


def tokens_per_turn() -> int:
    """Prompt tokens one question-and-answer pair of build_chat adds (with ChatML framing)."""
    from engine.model import ContextConfig, Model
    from engine.model_path import resolve_model_path
    model = Model(str(resolve_model_path()), ContextConfig(n_ctx=512, n_batch=512, n_threads=1,
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

    from engine import gguf_header, hardware, settings, threads
    cfg = settings.plan(hardware.detect(), gguf_header.read_facts(model),  # chatdb's own settings
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
    from engine.sampling import SamplingSettings
    with Archive.open(db) as archive:
        engine = Engine.open(archive, sampling=SamplingSettings(temperature=0, seed=1, max_tokens=8))
        engine.prepare(conv_id)          # what the console does as a chat opens
        time.sleep(TYPING)
        r = engine.reply(conv_id, QUESTION)
        engine.close()
    print(json.dumps({"ttft_ms": r.ttft_ms, "restore_ms": r.restore_ms, "ahead": r.restored_ahead}))


def typed(db, conv_id) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, __file__, "--typed-worker", str(db), str(conv_id)],
                          capture_output=True, text=True, check=True, env=env)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["ahead"], "the console's restore did not finish while typing"
    return result


def diskcache(model, cache_dir, prompt) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--diskcache-worker", model, cache_dir],
                          input=prompt, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(size: int, repeat: int, model: str, work: Path) -> dict:
    db = work / f"chat{size}.db"
    conv_id = build_chat(db, size)
    history = rendered_prompt(db, conv_id)
    ask_prompt = history + f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n"
    cache_dir = str(work / f"diskcache{size}")
    diskcache(model, cache_dir, history + "<|im_start|>assistant\n")  # fills the cache
    rows = {"chatdb": [], "typed": [], "re-read": [], "diskcache": []}
    restored = None
    for _ in range(repeat):
        # Each run starts again from the stored chat: fork its head, ask there.
        with Archive.open(db) as archive:
            fork = archive.fork(archive.conversation(conv_id).head_id).id
        r = chatdb(db, "--conv", str(fork), *ASK, QUESTION)
        rows["chatdb"].append(r["timings"]["ttft_ms"])
        restored = r["kv"]
        with Archive.open(db) as archive:
            fork = archive.fork(archive.conversation(conv_id).head_id).id
        rows["typed"].append(typed(db, fork)["ttft_ms"])
        with Archive.open(db) as archive:
            fork = archive.fork(archive.conversation(conv_id).head_id).id
        rows["re-read"].append(chatdb(db, "--conv", str(fork), "--no-kv", *ASK, QUESTION)["timings"]["ttft_ms"])
        rows["diskcache"].append(diskcache(model, cache_dir, ask_prompt)["ttft_ms"])
    with Archive.open(db) as archive:
        usage = archive.kv.usage()
    return {"size": size, "tokens": restored["restored_tokens"] + restored["computed_tokens"],
            "restored": restored, **{k: statistics.median(v) for k, v in rows.items()},
            "stored_per_raw": usage.stored_bytes / usage.raw_bytes, "db": db, "conv": conv_id}


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
    args = parser.parse_args()
    from engine.model_path import resolve_model_path
    model = str(resolve_model_path())
    with tempfile.TemporaryDirectory() as tmp:
        results = [measure(int(s), args.repeat, model, Path(tmp)) for s in args.sizes.split(",")]
        # Fresh chain for the fork figure: the measurements above already forked it.
        fork_db = Path(tmp) / "forks.db"
        ratio = forks_storage(fork_db, build_chat(fork_db, 2000))
    print(f"\nTime to first token after reopening a chat in a new process (median of {args.repeat}, ms)")
    print(f"{'tokens':>7} {'chatdb':>8} {'typed':>7} {'re-read':>9} {'diskcache':>10} "
          f"{'vs re-read':>11} {'vs diskcache':>13} {'typed vs diskcache':>19} {'restored':>9} {'restore ms':>11}")
    for r in results:
        print(f"{r['tokens']:>7} {r['chatdb']:>8.1f} {r['typed']:>7.1f} {r['re-read']:>9.1f} "
              f"{r['diskcache']:>10.1f} {r['re-read'] / r['chatdb']:>10.1f}x "
              f"{r['diskcache'] / r['chatdb']:>12.1f}x {r['diskcache'] / r['typed']:>18.1f}x "
              f"{r['restored']['restored_tokens']:>9} {r['restored']['restore_ms']:>11.1f}")
    print("typed: the console restores a chat as it opens; the first token then waits only "
          "for the question itself.")
    print(f"\nKV bytes stored per raw KV byte: " +
          ", ".join(f"{r['tokens']} tokens: {r['stored_per_raw']:.3f}" for r in results))
    print(f"Storage of ten forks of a 2,000-token chain vs the chain alone: {ratio:.3f}x")


if __name__ == "__main__":
    main()
