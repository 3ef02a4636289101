"""When a trial stops timing steps: once the median of its steps is known within the tolerance (its standard error),
not when two medians of the same few steps happen to agree."""

from __future__ import annotations

import math
import random

from parallel.tune.trial import _stable


def steps(n: int, spread: float, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [0.2 * math.exp(rng.gauss(0.0, spread)) for _ in range(n)]


def test_quiet_steps_are_stable_at_five():
    assert _stable(steps(5, 0.01), 0.03)  # a GPU's steps: 1.25 × 1% / √5 ≈ 0.6%


def test_noisy_steps_need_many_more_than_five():
    noisy = steps(40, 0.12)  # this VM's steps spread 12%: 1.25 × 12% / √n ≤ 3% from n ≈ 25
    first = next(n for n in range(2, 41) if _stable(noisy[:n], 0.03))
    assert 15 <= first <= 40, first


def test_a_median_that_merely_stopped_moving_is_not_enough():
    # the median of these five equals the median of the first three (the old rule stopped here), yet they spread 20%
    times = [0.20, 0.16, 0.24, 0.20, 0.20]
    assert not _stable(times, 0.03)


def test_one_step_or_a_zero_time_is_never_stable():
    assert not _stable([0.2], 0.03)
    assert not _stable([0.0, 0.0], 0.03)
