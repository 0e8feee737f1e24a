"""Decode speed with and without speculative decoding, on three kinds of task.

  editing     a small change to 60 lines of code (the answer repeats most of them)
  quotation   quoting from a long earlier message of the conversation
  prose       free writing (little to copy: drafting must not cost anything)

Greedy decoding, so both runs produce the same tokens; `--draft lookup` (prompt
lookup, adaptive) against `--draft off`, alternating over --repeat rounds in one
process; medians compared. Both answer in one archive, so `--draft auto` would
draft each run from the archive's earlier answer to the same question: that is
the --archive part's to measure.

    python bench/speculative.py [--repeat 3] [--max-tokens 400]

With --archive, drafting from the archive instead (bench/speculative_archive.py:
retry, edit, repeated questions, prose, editing beside an earlier edit):

    python bench/speculative.py --archive [--repeat 3] [--max-tokens 300]
        [--temperatures 0,0.7] [--questions 20] [--model PATH]
"""

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from chatdb.archive import Archive  # noqa: E402
from engine.chat import Engine  # noqa: E402
from engine.decode.lookup import LookupDrafter  # noqa: E402
from engine.kv.sources import common_prefix  # noqa: E402
from engine.llama.sampling import SamplingSettings  # noqa: E402

from replay import replayed_alone  # noqa: E402
from speculative_tasks import TASKS  # noqa: E402


def run(engine: Engine, archive: Archive, turns, max_tokens: int):
    conv = archive.create_conversation("bench")
    for role, text in turns[:-1]:
        archive.add_message(conv.id, role, text)
    settings = SamplingSettings(temperature=0, max_tokens=max_tokens)
    return engine.reply(conv.id, turns[-1][1], sampling=settings)


def same_prefix(archive, engine, plain_id: int, spec_id: int) -> str:
    a = archive.tokens.get(plain_id, engine.tokenizer)
    b = archive.tokens.get(spec_id, engine.tokenizer)
    same = common_prefix(a, b)
    return "all" if same == len(a) == len(b) else str(same)


def ceiling(tokens: list[int], n_prompt: int, costs) -> float:
    """Modelled speedup of lookup drafting had the answer followed the plain one exactly
    (replay.py: prompt lookup under its policy, watched guesses and all). It separates what
    the model's own text allows from what numeric near-ties (the `same` column) change."""
    return replayed_alone(LookupDrafter(tokens[:n_prompt]), costs, tokens, n_prompt)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=400)
    parser.add_argument("--archive", action="store_true", help="drafting from the archive")
    parser.add_argument("--temperatures", default="0,0.7", help="--archive: temperatures")
    parser.add_argument("--questions", type=int, default=20, help="--archive: repeated questions")
    parser.add_argument("--model", help="--archive: the model (default: the default model)")
    args = parser.parse_args()
    if args.archive:
        import speculative_archive
        args.temperatures = [float(t) for t in args.temperatures.split(",")]
        return speculative_archive.main(args)
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Archive.open(Path(tmp) / "s.db") as archive:
        plain = Engine.open(archive, use_kv=False, draft="off")
        spec = Engine.open(archive, use_kv=False, draft="lookup")
        for name, turns in TASKS.items():
            base, fast, figures, ceilings = [], [], [], []
            for _ in range(args.repeat):
                a = run(plain, archive, turns, args.max_tokens)
                b = run(spec, archive, turns, args.max_tokens)
                modelled = ceiling(plain.cache.live.tolist(), a.prompt_tokens, spec.tuning.costs())
                same = same_prefix(archive, plain, a.message_id, b.message_id)
                base.append(a.decode_tokens_per_s)
                fast.append(b.decode_tokens_per_s)
                figures.append(b.speculative)
                ceilings.append(modelled)
            rows.append((name, a.completion_tokens, statistics.median(base),
                         statistics.median(fast), figures, same, statistics.median(ceilings)))
        costs = spec.describe()
        plain.close()
        spec.close()
    print(f"\nDecode tokens/s, greedy, median of {args.repeat} alternating runs (same output both ways)")
    print(f"{'task':<10} {'tokens':>6} {'plain':>7} {'lookup':>7} {'speedup':>8} {'accepted':>9} {'drafted':>8} {'rate':>6} {'fwd':>5} {'k':>3} {'same':>5} {'ceiling':>8} {'of ceil':>8}")
    for name, n, b, f, figs, same, modelled in rows:
        last = figs[-1]
        rate = f"{last['acceptance_rate']:.2f}" if last["acceptance_rate"] is not None else "-"
        print(f"{name:<10} {n:>6} {b:>7.1f} {f:>7.1f} {f / b:>7.2f}x {last['accepted']:>9} "
              f"{last['drafted']:>8} {rate:>6} {last['target_forwards']:>5} {last['draft_length']:>3} "
              f"{same:>5} {modelled:>7.2f}x {f / b / modelled:>8.2f}")
    print("accepted/drafted/rate/fwd: guesses accepted, guesses made, their ratio, and target-model "
          "forward passes, in the last lookup run; k: draft length the policy settled on;\n"
          "same: tokens both answers share from the start ('all' if identical; a number means the\n"
          "llama.cpp in use sums a batch unlike a single step, see the Makefile); ceiling: the "
          "speedup this drafter and policy would reach\nby the calibrated cost model on the plain "
          "answer's own tokens: how much of it repeats the conversation sets it; of ceil: speedup / ceiling.")
    c, t = costs["cost_model"], costs["threads"]
    print(f"cost model ({c['source']}, {c['timings']} timings, {c['turns']} turns refined, "
          f"{t['decode']} decode threads: {t['reason']}): step {c['step_ms'][0]:.2f} ms at 0 tokens, "
          f"{c['step_ms'][1]:.2f} ms at 4,096; 5-row batch {c['batch5_ms'][0]:.2f} / "
          f"{c['batch5_ms'][1]:.2f} ms; verifying 4 guesses at 1,000 tokens = "
          f"{c['verify_4_at_1000']:.2f} steps")
    print("targets: prose lookup >= 0.97x plain; editing and quotation within 10% of the ceiling")


if __name__ == "__main__":
    main()
