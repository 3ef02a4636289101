"""Every parallel layer matches the single-process torch layer, for every flag combination (2 gloo ranks)."""

from __future__ import annotations

import itertools
import math

import pytest

import layer_cases as cases

ALL_FLAGS = list(itertools.product([False, True], repeat=3))  # (async, skip, fused)
VALID = [f for f in ALL_FLAGS if f[0] or not (f[1] or f[2])]
GATED = [f for f in ALL_FLAGS if f not in VALID]  # only loadable under policy="warn"
CASES = [(f, "strict") for f in VALID] + [(f, "warn") for f in GATED]


def flag_id(case) -> str:
    (a, s, f), policy = case
    return f"async{int(a)}-skip{int(s)}-fused{int(f)}-{policy}"


@pytest.mark.parametrize("case", CASES, ids=flag_id)
@pytest.mark.parametrize("gather_output", [True, False], ids=["gather", "no_gather"])
def test_column_parallel_linear_matches_nn_linear(pools, case, gather_output):
    flags, policy = case
    settings = pools(2).run(cases.column_parity, 2, flags, policy, gather_output)
    async_on = flags[0]
    assert f"async_allreduce={async_on}" in settings[0]
    assert f"fused_linear_param_grad_add={async_on and flags[2]}" in settings[0]


@pytest.mark.parametrize("case", CASES, ids=flag_id)
@pytest.mark.parametrize("input_is_parallel", [True, False], ids=["parallel_input", "full_input"])
def test_row_parallel_linear_matches_nn_linear(pools, case, input_is_parallel):
    flags, policy = case
    pools(2).run(cases.row_parity, 2, flags, policy, input_is_parallel)


@pytest.mark.parametrize("case", CASES[:2], ids=flag_id)
def test_vocab_parallel_embedding_matches_nn_embedding(pools, case):
    flags, policy = case
    pools(2).run(cases.embedding_parity, 2, flags, policy)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("ignore_index", [-100, 3])
def test_parallel_cross_entropy_matches_torch(pools, reduction, ignore_index):
    pools(2).run(cases.cross_entropy_parity, 2, reduction, ignore_index)


def test_non_divisible_size_names_the_layer_and_the_fix(pools):
    message = pools(2).run(cases.non_divisible_size_is_a_clear_error, 2)[0]
    assert message == (
        "ColumnParallelLinear: out_features=7 is not divisible by mp_degree=2; "
        "use a multiple of 2 (e.g. 8) or another mp_degree"
    )


def test_per_shard_init_makes_only_the_shard_with_nn_linear_bounds(pools):
    shapes = pools(2).run(cases.shard_init_draws_only_the_shard, 2)
    for shape, biggest in shapes:
        assert shape == [cases.OUT // 2, cases.IN]
        assert biggest <= 1 / math.sqrt(cases.IN)


@pytest.mark.parametrize("case", [((False, False, False), "strict"), ((True, True, True), "strict")], ids=flag_id)
def test_layers_match_torch_with_mp_degree_4(pools, case):
    flags, policy = case
    pool = pools(4)
    pool.run(cases.column_parity, 4, flags, policy, False)
    pool.run(cases.row_parity, 4, flags, policy, False)
    pool.run(cases.embedding_parity, 4, flags, policy)


@pytest.mark.parametrize("case", [((False, False, False), "strict"), ((True, True, True), "strict")], ids=flag_id)
def test_layers_without_bias_match_torch(pools, case):
    flags, policy = case
    pools(2).run(cases.column_parity, 2, flags, policy, False, bias=False)
    pools(2).run(cases.row_parity, 2, flags, policy, True, bias=False)
