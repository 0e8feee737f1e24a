"""A drafting run replayed on a known answer: the modelled speedup its guesses would give.

bench/speculative.py's ceiling (prompt lookup), and bench/speculative_archive.py's ceiling
(every drafter of --draft auto) and bound `best`, all replay a DraftRun here: the same
drafters and policies guess, a guess counts while it equals the answer's next token, and
each pass costs what the engine's cost model says. No timing: how much of the answer the
drafters could have guessed, apart from the noise of a run.
"""

from engine.decode.drafting import DraftRun, Policies
from engine.decode.modes import DraftMode


def replayed(run, costs, tokens: list, n_prompt: int) -> float:
    """Modelled speedup of a DraftRun (engine.decode.drafting) on the answer
    `tokens[n_prompt:]`: single steps against the passes its guesses would take."""
    position, cost = n_prompt + 1, 0.0
    while position < len(tokens):
        drafts = run.guesses(tokens[:position], position, len(tokens) - position)
        accepted = next((i for i, (g, t) in enumerate(zip(drafts, tokens[position:])) if g != t),
                        len(drafts))
        if drafts:
            run.verified(len(drafts), accepted)
        cost += costs.batch(len(drafts) + 1, position)
        position += accepted + 1
    return sum(costs.step(p) for p in range(n_prompt + 1, len(tokens))) / max(cost, 1e-9)



def replayed_alone(drafter, costs, tokens: list, n_prompt: int, name: str = "lookup",
                   mode: DraftMode = DraftMode.LOOKUP) -> float:
    """The same for one drafter, under a draft policy of its own by `costs`' verify cost."""
    run = DraftRun(mode, [(name, drafter, Policies(costs.verify_cost))])
    return replayed(run, costs, tokens, n_prompt)
