"""Prompt lookup's guesses: the vote over an n-gram's latest occurrences against the latest alone.

    python bench/lookup_vote.py [--model PATH] [--seeds 3] [--max-tokens 300]
        [--temperatures 0,0.7]

Each task (bench/speculative.py's editing, quotation and prose, and the two
requests about a file of bench/speculative_archive.py) is answered with
drafting off, once per seed; then prompt lookup is replayed on each answer
(bench/replay.py, under the engine's cost model and draft policy) twice: as
the engine drafts (engine/decode/lookup.py: what most of the n-gram's latest
occurrences went on with) and as it drafted before (the latest occurrence
only, the baseline). No timing: the modelled speedups of the two on the same
tokens, so the ratio says what the vote changes, apart from a run's noise.
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
from engine.llama.sampling import SamplingSettings  # noqa: E402

from replay import replayed_alone  # noqa: E402
from speculative_archive import CODE_REQUESTS  # noqa: E402
from speculative_tasks import TASKS  # noqa: E402


class LatestOnly(LookupDrafter):
    """The baseline: the tokens after the n-gram's latest occurrence alone."""

    def draft(self, k: int) -> list[int]:
        found = self.occurrences()
        return self.tokens[found[-1]:found[-1] + k] if found else []


def answered(engine: Engine, archive: Archive, turns, settings) -> "tuple[list, int]":
    """(the prompt's and answer's tokens, the prompt's length) of `turns` answered plainly."""
    conv = archive.create_conversation("bench")
    for role, text in turns[:-1]:
        archive.add_message(conv.id, role, text)
    result = engine.reply(conv.id, turns[-1][1], sampling=settings, draft="off")
    return engine.cache.live.tolist(), result.prompt_tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="the model (default: the default model)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=300)
    parser.add_argument("--temperatures", default="0,0.7")
    args = parser.parse_args()
    tasks = {**TASKS, **{f"file-{i + 1}": [("user", request)]
                         for i, (request, _) in enumerate(CODE_REQUESTS)}}
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Archive.open(Path(tmp) / "v.db") as archive:
        engine = Engine.open(archive, args.model, use_kv=False, draft="lookup")
        costs = engine.tuning.costs()   # one cost model for every replay of the run
        for temperature in (float(t) for t in args.temperatures.split(",")):
            for name, turns in tasks.items():
                seeds = range(1, (args.seeds if temperature > 0 else 1) + 1)
                pairs = []
                for seed in seeds:
                    settings = SamplingSettings(temperature=temperature, seed=seed,
                                                max_tokens=args.max_tokens)
                    tokens, n_prompt = answered(engine, archive, turns, settings)
                    pairs.append(tuple(replayed_alone(drafter(tokens[:n_prompt]), costs, tokens,
                                                      n_prompt)
                                       for drafter in (LatestOnly, LookupDrafter)))
                rows.append((name, temperature, pairs))
        engine.close()
    print("\nPrompt lookup replayed on plain answers: modelled speedup against --draft off, "
          "medians over seeds (greedy: one)")
    print(f"{'task':<10} {'temp':>4} {'runs':>4} {'latest':>7} {'vote':>7} {'vote/latest':>12} "
          f"{'better':>6} {'worse':>5}")
    for name, temperature, pairs in rows:
        latest, voted = (statistics.median(p[i] for p in pairs) for i in (0, 1))
        ratio = statistics.median(v / l for l, v in pairs)
        better = sum(v > l + 1e-9 for l, v in pairs)
        worse = sum(v < l - 1e-9 for l, v in pairs)
        print(f"{name:<10} {temperature:>4} {len(pairs):>4} {latest:>6.2f}x {voted:>6.2f}x "
              f"{ratio:>11.3f}x {better:>6} {worse:>5}")
    print("latest: the baseline, the tokens after the n-gram's latest occurrence; vote: the "
          "engine's, what most of its latest occurrences went on with;\nvote/latest: median of "
          "each answer's ratio; better/worse: answers where the vote's modelled speedup is "
          "above/below the baseline's")


if __name__ == "__main__":
    main()
