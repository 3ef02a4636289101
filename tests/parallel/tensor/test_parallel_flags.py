"""Each mp flag really changes what the layers do (2 gloo ranks): nodes, copies, collectives and ordering."""

from __future__ import annotations

import pytest

import flag_cases as cases


def test_skip_c_identity_drops_one_autograd_node_from_column_parallel_linear(pools):
    with_identity = pools(2).run(cases.column_graph_nodes, 2, (True, False, False))[0]
    skipped = pools(2).run(cases.column_graph_nodes, 2, (True, True, False))[0]
    assert skipped == with_identity - 1


def test_skip_c_identity_drops_the_copy_in_row_parallel_backward(pools):
    copies = pools(2).run(cases.row_backward_copies, 2, (True, False, False))[0]
    skipped = pools(2).run(cases.row_backward_copies, 2, (True, True, False))[0]
    assert copies - skipped == 1
    assert skipped == 0


@pytest.mark.parametrize("flags", [(False, False, False), (True, False, False), (True, True, True)], ids=["plain", "async", "all"])
@pytest.mark.parametrize("gather_output", [True, False], ids=["gather", "no_gather"])
def test_column_parallel_linear_issues_one_dx_all_reduce_per_backward(pools, flags, gather_output):
    forward, backward = pools(2).run(cases.column_collectives, 2, flags, gather_output)[0]
    assert forward == ({"all_gather": 1} if gather_output else {})
    assert backward == {"all_reduce": 1}


@pytest.mark.parametrize("fused", [False, True], ids=["unfused", "fused"])
def test_async_allreduce_launches_before_the_weight_grad_and_waits_after(pools, fused):
    events = pools(2).run(cases.async_allreduce_is_issued_before_the_weight_grad, 2, fused)[0]
    assert events == ["all_reduce(async)", "dW", "wait"]


@pytest.mark.parametrize("micro_batches", [1, 4])
def test_fused_flag_accumulates_into_main_grad_exactly_like_unfused_grads(pools, micro_batches):
    pools(2).run(cases.fused_accumulates_into_main_grad, 2, micro_batches)


def test_fused_flag_without_main_grad_accumulates_into_grad(pools):
    pools(2).run(cases.fused_without_main_grad_accumulates_into_grad, 2)


def test_mp_degree_1_layers_issue_no_collectives(pools):
    assert pools(2).run(cases.mp_degree_1_layers_are_plain_torch, 2) == [0, 0]


def test_bf16_weights_accumulate_fused_gradients_in_fp32(pools):
    fused_error, bf16_error = pools(2).run(cases.bf16_fused_accumulates_in_fp32, 2, 64)[0]
    assert fused_error < 1e-2
    assert fused_error < bf16_error / 4  # fp32 accumulation is much closer than summing in bf16


def test_the_fused_path_does_not_hide_nan_or_inf(pools):
    assert pools(2).run(cases.fused_path_does_not_hide_nan_or_inf, 2) == [(True, True), (True, True)]


@pytest.mark.parametrize("fused", [False, True], ids=["unfused", "fused"])
def test_the_async_path_works_under_bf16_autocast(pools, fused):
    pools(2).run(cases.async_path_works_under_autocast, 2, fused)


def test_per_shard_init_accepts_any_seed(pools):
    assert pools(2).run(cases.shard_init_works_with_any_seed, 2)[0] == [8, 4]


def test_parallel_cross_entropy_refuses_a_second_backward_with_a_clear_error(pools):
    message = pools(2).run(cases.cross_entropy_refuses_a_second_backward_clearly, 2)[0]
    assert "retain_graph=True through it is not supported" in message
