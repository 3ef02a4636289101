"""Gradient clipping that is right under tensor parallelism, and a check that replicas agree."""

from __future__ import annotations

import math

import pytest

import clip_cases as cases

LAYOUTS = [(1, 2), (1, 4), (2, 2)]  # (dp, mp)
FLAGS = {"no_flags": (False, False, False), "all_flags": (True, True, True)}


@pytest.mark.parametrize("norm_type", [2.0, math.inf], ids=["l2", "inf"])
@pytest.mark.parametrize("flags", FLAGS.values(), ids=FLAGS.keys())
@pytest.mark.parametrize(("dp", "mp"), LAYOUTS, ids=[f"dp{d}_mp{m}" for d, m in LAYOUTS])
def test_the_global_norm_and_clipped_steps_match_the_unparallelised_model(pools, dp, mp, flags, norm_type):
    max_norm = 0.05 if norm_type == 2.0 else 0.005
    norms = pools(dp * mp).run(cases.clipped_training, dp, mp, flags, norm_type, max_norm, timeout=180)
    assert all(n == norms[0] for n in norms)  # every rank returns the same norm


def test_nan_is_never_hidden_and_error_if_nonfinite_raises_as_torch_does(pools):
    results = pools(2).run(cases.nonfinite, 2)
    for message, norm_was_nan in results:
        assert norm_was_nan  # on both ranks, though only rank 1's shard holds the NaN
        assert message.startswith("The total norm of order 2.0 for gradients from `parameters` is non-finite")


@pytest.mark.parametrize(("dp", "mp"), [(1, 2), (2, 2)], ids=["mp2", "dp2_mp2"])
def test_check_replicas_passes_on_a_correct_run(pools, dp, mp):
    assert pools(dp * mp).run(cases.replicas, dp, mp, False, timeout=120) == ["ok"] * (dp * mp)


def test_check_replicas_names_the_parameter_ranks_and_difference(pools):
    messages = pools(2).run(cases.replicas, 1, 2, True)
    assert messages[0] == messages[1]
    assert messages[0].startswith("down.bias differs across the mp group [0, 1]: ranks [1] differ from rank 0 by up to 0.001")


def test_a_nan_on_one_rank_is_reported_on_every_rank_without_hanging(pools):
    messages = pools(2).run(cases.replicas_with_a_nan_on_one_rank)
    assert messages[0] == messages[1] and messages[0].startswith("norm.weight differs across the mp group [0, 1]: ranks [1]")


def test_frozen_parameters_get_no_main_grad_and_no_update(pools):
    assert pools(2).run(cases.frozen_parameters_stay_put_with_main_grad) == [True, True]
