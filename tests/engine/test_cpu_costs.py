"""The CPU cost model that sizes drafts."""

from engine import cpu_costs


def test_verifying_guesses_costs_less_than_stepping_through_them():
    for cells in (100, 1000, 4000):
        assert 1 < cpu_costs.verify_cost(1, cells) < 2
        for k in range(1, 17):
            assert cpu_costs.verify_cost(k, cells) < k + 1


def test_each_extra_guess_costs_more_in_a_long_context():
    assert cpu_costs.batch(9, 4000) - cpu_costs.batch(8, 4000) > cpu_costs.batch(9, 100) - cpu_costs.batch(8, 100)
    assert cpu_costs.step(100) < cpu_costs.step(4000)
