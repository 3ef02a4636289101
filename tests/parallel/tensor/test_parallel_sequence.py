"""Sequence parallelism (MpConfig.sequence_parallel, recompute_allgather, sp_async_reduce_scatter) on gloo ranks."""

from __future__ import annotations

import itertools

import pytest

import strategy
import sequence_cases as cases

# (mp_async_allreduce, mp_fused_linear_param_grad_add, sp_async_reduce_scatter, recompute_allgather):
# every combination the rules allow (fused requires async).
VALID = [f for f in itertools.product([False, True], repeat=4) if not (f[1] and not f[0])]


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("flags", VALID, ids=lambda f: "-".join(n for n, on in zip(["async", "fused", "rs", "rag"], f) if on) or "plain")
def test_norm_column_row_block_matches_one_process_over_several_steps(pools, world, flags):
    settings = pools(world).run(cases.mlp_parity, world, flags)[0]
    assert settings == {"sequence_parallel": True, "sp_async_reduce_scatter": flags[2], "recompute_allgather": flags[3]}


@pytest.mark.parametrize("recompute", [False, True], ids=["saved", "recompute_allgather"])
def test_column_all_gathers_forward_and_reduce_scatters_backward(pools, recompute):
    forward, backward = pools(2).run(cases.collectives, 2, (True, True, True, recompute), "column")[0]
    assert forward == {"all_gather": 1}
    assert backward == ({"reduce_scatter": 1, "all_gather": 1} if recompute else {"reduce_scatter": 1})


def test_row_reduce_scatters_forward_and_all_gathers_backward(pools):
    forward, backward = pools(2).run(cases.collectives, 2, (False, False, False, False), "row")[0]
    assert (forward, backward) == ({"reduce_scatter": 1}, {"all_gather": 1})


def test_vocab_embedding_enters_the_region_with_a_reduce_scatter(pools):
    forward, backward = pools(2).run(cases.collectives, 2, (False, False, False, False), "embedding")[0]
    assert (forward, backward) == ({"reduce_scatter": 1}, {"all_gather": 1})


@pytest.mark.parametrize("fused", [False, True], ids=["unfused", "fused"])
def test_sp_async_reduce_scatter_launches_before_the_weight_grad_and_waits_after(pools, fused):
    assert pools(2).run(cases.reduce_scatter_order, 2, True, fused)[0] == ["reduce_scatter(async)", "dW", "wait"]
    assert pools(2).run(cases.reduce_scatter_order, 2, False, fused)[0] == ["reduce_scatter", "dW"]


def test_recompute_allgather_saves_the_local_shard_and_gathers_again_in_backward(pools):
    saved, recomputed = (pools(2).run(cases.saved_bytes, 2, r)[0] for r in (False, True))
    assert saved["saved"] - recomputed["saved"] == saved["gathered_input"] - saved["local_input"]
    assert saved["backward"] == {"reduce_scatter": 1}
    assert recomputed["backward"] == {"reduce_scatter": 1, "all_gather": 1}


def test_a_sequence_not_divisible_by_mp_degree_names_the_layer_length_and_degree(pools):
    message = pools(2).run(cases.row_rejects_an_indivisible_sequence, 2)[0]
    assert message.startswith("RowParallelLinear: sequence length 9 (dim 0) is not divisible by mp_degree=2")


def test_a_plain_optimizer_cannot_step_unsummed_sequence_parallel_grads(pools):
    plain, reduced, hybrid = pools(2).run(cases.plain_optimizer_is_stopped, 2)[0]
    assert plain.startswith("plain: a sequence-parallel parameter (marked by parallel.mark_sequence_parallel")
    assert "parallel.reduce_sequence_parallel_grads" in plain
    assert (reduced, hybrid) == ("reduced: ok", "hybrid: ok")


def test_the_sequence_parallel_flags_require_the_switch():
    with pytest.raises(strategy.StrategyError, match=r"<string>:1:44: hybrid_configs.mp_configs.sp_async_reduce_scatter requires "
                                                     r"hybrid_configs.mp_configs.sequence_parallel: true"):
        strategy.loads("hybrid_configs { mp_degree: 2 mp_configs { sp_async_reduce_scatter: true } }")
    with pytest.warns(strategy.StrategyWarning, match="resolving recompute_allgather off"):
        s = strategy.loads("hybrid_configs { mp_degree: 2 mp_configs { recompute_allgather: true } }", policy="warn")
    assert not strategy.resolve(s, world_size=2, policy="warn").mp.recompute_allgather


def test_sequence_parallel_has_no_effect_at_mp_degree_1():
    s = strategy.loads("hybrid_configs { mp_degree: 1 mp_configs { sequence_parallel: true recompute_allgather: true } }")
    r = strategy.resolve(s, world_size=1)
    assert not (r.mp.sequence_parallel or r.mp.recompute_allgather)
    assert "hybrid_configs.mp_configs.sequence_parallel is set but has no effect: hybrid_configs.mp_degree is 1." in r.notes


def test_scatter_to_sequence_returns_a_copy_that_may_be_changed_in_place(pools):
    assert pools(2).run(cases.scattered_is_a_copy, 2) == [True, True]
