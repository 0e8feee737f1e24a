"""chatdb's decode rate against a bare llama.cpp loop, in the same run.

The bare loop is llama.cpp's examples/simple in Python on the low-level API:
one llama_batch, llama_decode, a greedy sampler, nothing else. chatdb's rate
is Engine.reply's decode_tokens_per_s (streaming, UTF-8, cancellation checks
and all). Both use the same model file, context settings and threads, and
alternate over --repeat rounds; medians are compared.

    python bench/decode.py [--tokens 128] [--repeat 5]
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import llama_cpp  # noqa: E402

from chatdb.archive import Archive  # noqa: E402
from engine.chat import Engine  # noqa: E402
from engine.sampling import SamplingSettings  # noqa: E402

PROMPT = "Write a long, detailed story about a lighthouse keeper and a storm."


def bare_loop(engine: Engine, prompt_tokens: list[int], n: int) -> float:
    """Tokens/s of the minimal loop, on chatdb's own context (cleared first)."""
    model = engine.model
    model.clear()
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
    model.clear()
    engine.cache.live = engine.cache.live[:0]
    return (n - 1) / elapsed


def chatdb_rate(engine: Engine, archive: Archive, n: int, draft: str) -> float:
    conv = archive.create_conversation("bench")
    engine.cache.reset()
    engine.draft_mode = draft
    result = engine.reply(conv.id, PROMPT, sampling=SamplingSettings(temperature=0, max_tokens=n))
    if result.completion_tokens < n:
        raise SystemExit(f"the answer ended after {result.completion_tokens} tokens; lower --tokens")
    return result.decode_tokens_per_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, Archive.open(Path(tmp) / "b.db") as archive:
        engine = Engine.open(archive, use_kv=False)
        prompt = engine.prompts.piece_tokens([], {"role": "user", "content": PROMPT})
        runs = {"bare llama.cpp loop": [], "chatdb, --draft off": [], "chatdb, --draft auto": []}
        for _ in range(args.repeat):
            runs["bare llama.cpp loop"].append(bare_loop(engine, prompt, args.tokens))
            runs["chatdb, --draft off"].append(chatdb_rate(engine, archive, args.tokens, "off"))
            runs["chatdb, --draft auto"].append(chatdb_rate(engine, archive, args.tokens, "lookup"))
        engine.close()
    base = statistics.median(runs["bare llama.cpp loop"])
    print(f"\nDecode rate, {args.tokens} tokens, median of {args.repeat} alternating runs")
    print(f"{'loop':<22} {'tokens/s':>9} {'ratio':>7}   runs")
    for name, rates in runs.items():
        median = statistics.median(rates)
        print(f"{name:<22} {median:>9.1f} {median / base:>7.3f}   {', '.join(f'{x:.1f}' for x in rates)}")


if __name__ == "__main__":
    main()
