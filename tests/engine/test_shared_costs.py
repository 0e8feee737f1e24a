"""What a drafted row costs beside other sequences: learned from timed shared passes, the
prior until they can say, and what the draft policy then drafts in a shared pass."""

import pytest

from chatdb.archive import Archive
from engine.batching.request_loop import RequestLoop
from engine.chat import Engine
from engine.decode.draft_policy import DraftPolicy, shared_cost
from engine.machine import cpu_costs
from engine.machine.shared_costs import MIN_PASSES, PRIOR_ROW, SharedPassCosts

from .conftest import GREEDY
from .test_slots import Waiter


def timed(costs: SharedPassCosts, sequences: int, rows: int, ms: float, n: int) -> None:
    for _ in range(n):
        costs.add(sequences, rows, ms)


def test_the_prior_holds_until_plain_and_drafted_passes_are_both_timed():
    costs = SharedPassCosts()
    assert costs.row_cost() == PRIOR_ROW and costs.describe()["source"] == "prior"
    timed(costs, 4, 4, 40.0, MIN_PASSES)           # four sequences, a token each: 10 ms a token
    timed(costs, 4, 8, 52.0, MIN_PASSES - 1)       # four drafted rows more: not yet enough
    assert costs.row_cost() == PRIOR_ROW
    costs.add(4, 8, 52.0)
    assert costs.row_cost() == pytest.approx(12 / 4 / 10)   # 0.3 of a plain token a row
    assert costs.describe() == {"row_cost": 0.3, "source": "measured", "passes": 2 * MIN_PASSES}


def test_bins_of_several_sizes_are_weighed_and_odd_passes_bounded():
    costs = SharedPassCosts()
    timed(costs, 2, 2, 20.0, 8)                    # 10 ms a token beside one other
    timed(costs, 2, 4, 36.0, 8)                    # 2 rows more: 0.8 each
    timed(costs, 3, 3, 30.0, 8)
    timed(costs, 3, 4, 34.0, 8)                    # 1 row more: 0.4
    assert costs.row_cost() == pytest.approx(0.6)
    costs.add(3, 4, 34_000.0)                      # a pass preempted by another process
    assert costs.row_cost() < 1.0
    costs.add(1, 3, 10.0)                          # a sequence alone is no shared pass
    costs.add(3, 2, 10.0)                          # nor fewer rows than sequences
    assert (1, 2) not in costs.bins and (3, -1) not in costs.bins


def test_a_cheaper_measured_row_lets_common_guesses_draft_beside_the_others():
    prior = DraftPolicy(cpu_costs.verify_cost)
    cheap = DraftPolicy(cpu_costs.verify_cost, shared_row=0.3)
    assert prior.length(cells=100, shared=3) == 0      # at 0.8 a row, 0.6 acceptance does not pay
    k = cheap.length(cells=100, shared=3)
    assert k > 0 and shared_cost(k, 100, 0.3) < shared_cost(k, 100)


def side_by_side(model_path, db, draft: str, prompts: list[str], max_tokens: int):
    """The results of answering `prompts` at once on one context of two sequences, and the
    engine's tuning after them (its timed shared passes)."""
    loop = RequestLoop(lambda: Engine.open(Archive.open(db), model_path, n_ctx=1024, draft=draft,
                                           n_seq=2), capacity=2)
    loop.start()
    waiters = [Waiter(prompt) for prompt in prompts]
    for w in waiters:
        w.turn.sampling = GREEDY.with_(max_tokens=max_tokens)
    try:
        assert all(loop.submit(w.turn) for w in waiters)
        for w in waiters:
            assert w.done.wait(300) and w.error is None, w.error
        return [w.outcome.result for w in waiters], loop.engine.tuning
    finally:
        loop.close()


def test_the_engine_times_its_own_shared_passes(model_path, tmp_path):
    """Two answers at once on one context: the passes they share are timed, as two
    sequences of plain rows (drafting is off), and the engine reports what it learned."""
    # Answers long enough to be generated side by side once both prompts are read.
    results, tuning = side_by_side(model_path, tmp_path / "shared.db", "off",
                                   ["Write a long story about a lighthouse keeper.",
                                    "Write a long story about a baker in Kyoto."], 24)
    assert [r.completion_tokens for r in results] == [24, 24]
    assert tuning.shared.bins.get((2, 0), [0])[0] > 0 and all(s == 2 for s, _ in tuning.shared.bins)
    assert tuning.describe()["shared_pass"]["passes"] > 0
