"""The prefill pace: the line it fits to steps, the chunk it gives, and the fair share."""

import pytest

from engine.batching.prefill_pace import FIRST_CHUNK, LEAST_CHUNK, PrefillPace, share


def steps(pace, fixed, per_token, sizes):
    for n in sizes:
        pace.record(n, fixed + per_token * n)


def test_the_fit_recovers_the_fixed_part_and_the_part_per_token():
    pace = PrefillPace(512)
    steps(pace, 0.010, 0.0085, [1, 4, 1, 30, 4, 8, 1])
    fixed, per_token = pace.fit()
    assert fixed == pytest.approx(0.010, rel=1e-6) and per_token == pytest.approx(0.0085, rel=1e-6)


def test_a_cpu_like_line_gives_short_steps_and_a_gpu_like_line_the_whole_batch():
    cpu, gpu = PrefillPace(512), PrefillPace(512)
    steps(cpu, 0.010, 0.0085, [1, 2, 16, 1, 4])
    steps(gpu, 0.004, 0.00002, [1, 2, 16, 1, 4])
    assert LEAST_CHUNK <= cpu.chunk() < 64       # fixed part 5% of a ~0.2 s step
    assert gpu.chunk() == 512


def test_steps_of_one_size_keep_the_last_chunk():
    pace = PrefillPace(512)
    assert pace.chunk() == FIRST_CHUNK            # nothing measured yet
    steps(pace, 0.010, 0.0085, [1, 20, 1, 20])
    fitted = pace.chunk()
    steps(pace, 0.5, 0.0, [4] * 400)             # only decoding: the parts cannot be told apart
    assert pace.fit() is None and pace.chunk() == fitted


def test_share_gives_equal_parts_and_what_one_does_not_need_to_the_others():
    assert share([500, 10, 500], 100) == [45, 10, 45]   # 33 each, then 10's leftover split
    assert share([3, 4], 100) == [3, 4]
    assert share([13, 13, 13, 13], 26) == [7, 7, 6, 6]  # the remainder: the earlier first
    assert share([7, 7, 7], 10) == [4, 3, 3]
    assert share([2, 9, 1, 9], 12) == [2, 5, 1, 4]   # 3 each; 2 and 1 leave 3 to split
    assert share([], 10) == []
    assert share([5, 0], 10) == [5, 0]
    assert share([4, 4], 0) == [0, 0]
