"""Batch planning for llama.cpp's CPU flash attention."""

from engine import cpu_costs


def test_split_never_ends_in_a_small_batch_after_big_ones():
    for total in (1, 63, 64, 511, 512, 530, 1030, 4000):
        sizes = cpu_costs.split(total, 512)
        assert sum(sizes) == total and max(sizes) <= 512
        if len(sizes) > 1:
            assert sizes[-1] >= cpu_costs.TILE


def test_a_few_tokens_after_a_long_context_are_computed_as_a_full_tile():
    assert cpu_costs.compute_from(2700, 2722) == 2722 - cpu_costs.TILE
    assert cpu_costs.compute_from(600, 622) == 600      # short context: rows are cheaper
    assert cpu_costs.compute_from(2700, 2701) == 2700   # one token: the fast single path
    assert cpu_costs.compute_from(10, 40) == 10         # not enough tokens for a tile


def test_verification_gets_dearer_with_context():
    k = 4
    assert cpu_costs.verify_cost(k, 100) < cpu_costs.verify_cost(k, 1000) < cpu_costs.verify_cost(k, 4000)
    assert cpu_costs.verify_cost(63, 1000) < cpu_costs.verify_cost(40, 1000)  # a full tile
