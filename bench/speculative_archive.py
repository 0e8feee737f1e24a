"""bench/speculative.py --archive: drafting from the archive against drafting off, same run.

Two archives and two engines on the same model: `--draft off` on one,
`--draft auto` (the archive, then lookup) on the other; each archive gets the
same setup (answers written with drafting off, so both hold the same tokens),
then the same timed turns. Tasks:

  prose     a story, nothing like it in the archive (drafting must cost nothing)
  retry     /retry of a ~300-token answer (a new sibling answer to the question): a story
  retry-code  the same, of a request about a file (the answer shows the file again)
  edit      /edit of a question by a few words, its earlier answer in the archive
            (a story: the model mostly writes another one)
  edit-code the same, of a request about a file (its earlier answer mostly holds)
  repeat    a script asking the same questions, each in a new conversation, twice:
            timed on the second pass
  editing   bench/speculative.py's editing task, the archive holding an earlier
            edit of the same file (another rename)

Each repeat uses its own question (no repeat helps another). Both engines
sample with the same seed, so drafted and plain answers are the same tokens
(`same`); at temperature > 0 the retry samples another seed than its sibling.
ceiling: the modelled speedup the drafters would reach on the plain answer's
own tokens (replayed through the same drafters, before the drafted run).
best: the same for a drafter that always guesses the model's own most likely
next tokens (read from the model's logits over the plain answer). Where the
drafter cannot know the draw (a retry samples another seed than its sibling)
no guess holds more often on average than the likeliest token, so no drafter
of any kind beats `best` there: at temperature 0.7 it bounds the retry, and
its speedup target is out of reach where `best` is below it. (With the seed
of an answer already in the archive, as in `repeat`, the archive knows the
draw and goes past `best`; at temperature 0 every such guess holds, and `best`
says only what one policy's lengths make of that.)
"""

import statistics
import tempfile
from pathlib import Path

import numpy as np

from chatdb.archive import Archive
from engine.chat import Engine
from engine.decode.modes import DraftMode
from engine.kv.sources import common_prefix
from engine.llama.sampling import SamplingSettings

from replay import replayed, replayed_alone
from speculative_tasks import CODE, TASKS

STORIES = ["a fox who learns to read", "a lighthouse keeper's daughter", "a clockmaker's last clock",
           "a river that ran backwards", "a baker who could not sleep", "a map with no edges",
           "a violin found in an attic", "two crows who kept a shop", "a snowman in July",
           "a train that never arrived", "a garden on the moon", "a cat who ran for mayor",
           "the last library on earth", "a boy who collected echoes", "a kite that flew away",
           "an owl who was afraid of the dark"]
QUESTIONS = [f"Explain in a few sentences what {thing} is and what it is used for."
             for thing in ("a hash table", "a compiler", "photosynthesis", "a transistor",
                           "an index in a database", "a spreadsheet", "TCP", "a vaccine",
                           "inflation", "a glacier", "a sonnet", "a lens", "a mortgage",
                           "a neuron", "a volcano", "recursion", "a telescope", "a battery",
                           "a tide", "a contract")]


FILE = f"Here is a Python file:\n\n```python\n{CODE}```\n\n"
# A request about the file, and the same request reworded by a few words.
CODE_REQUESTS = [(FILE + "Add a docstring to main and show the whole file.",
                  FILE + "Add a short docstring to main, then show the whole file."),
                 (FILE + "Change the default retries from 3 to 5 and show the whole file.",
                  FILE + "Change the default retries from 3 to 5, and show all of the file.")]


class Pair:
    """An engine drafting off and one drafting auto, each on its own archive."""

    def __init__(self, tmp: Path, model=None):
        self.archives = {m: Archive.open(tmp / f"{m}.db") for m in ("off", "auto")}
        self.engines = {m: Engine.open(a, model, use_kv=False, draft=m)
                        for m, a in self.archives.items()}

    def setup(self, turns, settings) -> dict:
        """The same conversation in both archives, answered with drafting off: {mode: (conv
        id, the last answer's TurnResult)}."""
        made = {}
        for mode, archive in self.archives.items():
            conv = archive.create_conversation("bench")
            for role, text in turns[:-1]:
                archive.add_message(conv.id, role, text)
            made[mode] = (conv.id, self.engines[mode].reply(conv.id, turns[-1][1], sampling=settings,
                                                             draft="off"))
        return made

    def close(self) -> None:
        for mode in self.engines:
            self.engines[mode].close()
            self.archives[mode].close()


def timed(pair: Pair, ask, settings) -> dict:
    """ask(archive) -> (conversation id, message to answer), in both archives: answered
    plainly, then the ceiling replayed on the plain answer's tokens, then drafted."""
    plain_engine, auto_engine = pair.engines["off"], pair.engines["auto"]
    plain = plain_engine.answer(*ask(pair.archives["off"]), sampling=settings)
    tokens = plain_engine.cache.live.tolist()
    conv, message = ask(pair.archives["auto"])
    modelled = ceiling(auto_engine, tokens, plain.prompt_tokens, (conv, message))
    best = best_guess(plain_engine, tokens, plain.prompt_tokens)
    auto = auto_engine.answer(conv, message, sampling=settings)
    answers = np.asarray(tokens[plain.prompt_tokens:]), auto_engine.cache.live[auto.prompt_tokens:]
    parted = common_prefix(*answers)
    same = parted == len(answers[0]) == len(answers[1])
    return {"plain": plain.decode_tokens_per_s, "auto": auto.decode_tokens_per_s,
            "tokens": auto.completion_tokens, "same": same, "spec": auto.speculative,
            "ceiling": modelled, "best": best, "parted": parted}


def ceiling(engine: Engine, tokens: list, n_prompt: int, answering) -> float:
    """Modelled speedup of the engine's drafters had the answer been `tokens[n_prompt:]`
    (the plain one): the same drafters and policies guess, a guess counts while it
    equals the plain answer's next token, each pass costs what the engine's cost model
    says (bench/speculative.py's ceiling, with every drafter of --draft auto)."""
    costs = engine.tuning.costs()
    run = engine.scheduler.slots[0].drafting.run(tokens[:n_prompt], cost=costs.verify_cost,
                                                 answering=answering)
    return replayed(run, costs, tokens, n_prompt)


def best_guess(engine: Engine, tokens: list, n_prompt: int) -> float:
    """The same for a drafter guessing the model's likeliest tokens along the plain answer
    `tokens[n_prompt:]`, under one draft policy by the same cost model."""
    costs = engine.tuning.costs()
    drafter = Likeliest(likeliest(engine, tokens, n_prompt), n_prompt)
    return replayed_alone(drafter, costs, tokens, n_prompt, "likeliest", DraftMode.MODEL)


class Likeliest:
    """A drafter guessing the model's likeliest tokens (`found[j]` for position n_prompt + j):
    a draft model that always agrees with the model, asked for nothing (as generous as a
    bound should be)."""

    free_to_ask = True

    def __init__(self, found: list, n_prompt: int):
        self.found, self.n_prompt = found, n_prompt

    def propose(self, context: list, k: int) -> list:
        at = len(context) - self.n_prompt
        return self.found[at:at + k]


def likeliest(engine: Engine, tokens: list, n_prompt: int) -> list:
    """The model's most likely token at each position of the answer `tokens[n_prompt:]`,
    given the tokens before it: the answer read again on the engine's own sequence with
    logits at every row (the sequence is left holding all but its last token)."""
    seq, found = engine.cache.seq, []
    seq.keep(n_prompt - 1)
    rows = engine.model.config.n_batch
    for start in range(n_prompt - 1, len(tokens) - 1, rows):
        chunk = tokens[start:min(start + rows, len(tokens) - 1)]
        seq.verify(chunk)
        found += [int(engine.model.logits(j).argmax()) for j in range(len(chunk))]
    return found


def new_question(text):
    def ask(archive):
        conv = archive.create_conversation("bench")
        return conv.id, archive.add_message(conv.id, "user", text).id
    return ask


def retry_of(made):
    def ask(archive):
        conv, first = made[archive.db_path.stem]
        return conv, first.user_message_id
    return ask


def edit_of(made, text):
    def ask(archive):
        conv, first = made[archive.db_path.stem]
        parent = archive.message(first.user_message_id).parent_id
        return conv, archive.add_message(conv, "user", text, parent_id=parent).id
    return ask


def run_tasks(pair: Pair, temperature: float, repeat: int, tokens: int, questions: int) -> dict:
    settings = SamplingSettings(temperature=temperature, max_tokens=tokens, seed=1)
    other_seed = settings.with_(seed=2)
    rows = {name: [] for name in ("prose", "retry", "retry-code", "edit", "edit-code", "repeat",
                                  "editing")}
    for r in range(repeat):
        rows["prose"].append(timed(pair, new_question(f"Write a story about {STORIES[r]}."), settings))
    for r in range(repeat):
        story = f"Write a long story about {STORIES[-1 - r]}, in four paragraphs."
        made = pair.setup([("user", story)], settings)
        rows["retry"].append(timed(pair, retry_of(made), other_seed))
        made = pair.setup([("user", f"Tell me about {STORIES[r]} in a short story.")], settings)
        rows["edit"].append(timed(pair, edit_of(made, f"Tell me about {STORIES[r]} in a short tale."),
                                  settings))
        request = CODE_REQUESTS[r % len(CODE_REQUESTS)]
        made = pair.setup([("user", request[0])], settings)
        rows["retry-code"].append(timed(pair, retry_of(made), other_seed))
        rows["edit-code"].append(timed(pair, edit_of(made, request[1]), settings))
    asked = QUESTIONS[:questions]
    for text in asked:   # the first pass, both ways, untimed
        pair.setup([("user", text)], settings)
    rows["repeat"] = [timed(pair, new_question(text), settings) for text in asked]
    renamed = TASKS["editing"][0][1]
    pair.setup([("user", renamed.replace("load_config to read_config", "save_config to write_config"))],
               settings)
    rows["editing"] = [timed(pair, new_question(renamed), settings) for _ in range(max(1, repeat // 2))]
    return rows


def report(rows: dict, temperature: float) -> None:
    print(f"\nDrafting from the archive (--draft auto) against --draft off, temperature "
          f"{temperature}: decode tokens/s, medians of each task's runs")
    print(f"{'task':<10} {'runs':>4} {'tokens':>6} {'off':>7} {'auto':>7} {'speedup':>8} "
          f"{'ceiling':>8} {'best':>6} {'archive':>8} {'lookup':>7} {'tok/pass':>8} {'same':>5}")
    for name, runs in rows.items():
        if not runs:
            continue
        # An answer of one token has no decode rate: its run has no speedup to give.
        ratios = [r["auto"] / r["plain"] for r in runs if r["plain"] and r["auto"]]
        speedup = f"{statistics.median(ratios):>7.2f}x" if ratios else f"{'-':>8}"
        by = [r["spec"]["by_drafter"] for r in runs]
        share = {d: statistics.median(b.get(d, {}).get("accepted", 0) / max(1, r["tokens"])
                                      for b, r in zip(by, runs)) for d in ("archive", "lookup")}
        per_pass = statistics.median(r["tokens"] / max(1, r["spec"]["target_forwards"]) for r in runs)
        print(f"{name:<10} {len(runs):>4} {statistics.median(r['tokens'] for r in runs):>6.0f} "
              f"{statistics.median(r['plain'] for r in runs):>7.1f} "
              f"{statistics.median(r['auto'] for r in runs):>7.1f} {speedup} "
              f"{statistics.median(r['ceiling'] for r in runs):>7.2f}x "
              f"{statistics.median(r['best'] for r in runs):>5.2f}x "
              f"{share['archive']:>8.2f} {share['lookup']:>7.2f} {per_pass:>8.2f} "
              f"{sum(r['same'] for r in runs):>2}/{len(runs)}")
    for name, runs in rows.items():
        for i, r in enumerate(runs):
            if not r["same"]:
                print(f"{name} run {i + 1}: the drafted answer parted from the plain one at token "
                      f"{r['parted']} ({r['tokens']} tokens drafted)")
    print("archive/lookup: share of the answer's tokens that were accepted guesses of each "
          "drafter; tok/pass: tokens per target forward pass (1.0: no guess paid);\nceiling: the "
          "modelled speedup of the same drafters on the plain answer's tokens; best: of a drafter "
          "guessing the model's likeliest tokens;\nsame: runs whose "
          "drafted answer is the plain one token for token")


def main(args) -> None:
    for temperature in args.temperatures:
        with tempfile.TemporaryDirectory() as tmp:
            pair = Pair(Path(tmp), args.model)
            try:
                rows = run_tasks(pair, temperature, args.repeat, args.max_tokens, args.questions)
            finally:
                pair.close()
        report(rows, temperature)
    print("targets: retry >= 2.0x at 0, >= 1.4x at 0.7; edit >= 1.5x; repeat >= 1.8x; "
          "prose >= 0.97x; editing: reported")
