"""A small model (embedding → column → row → layer norm → column head → parallel cross entropy) trains
exactly like its single-process twin, and HybridParallelOptimizer's sync options really act."""

from __future__ import annotations

import pytest

import model_cases as cases

NO_SYNC = {"sync_param": False, "sync_grad": False, "sync_moment": False}
ALL_SYNC_AVG = {"sync_param": True, "sync_grad": True, "sync_moment": True, "sync_mode": "average"}
ALL_SYNC_BCAST = {"sync_param": True, "sync_grad": True, "sync_moment": True, "sync_mode": "broadcast"}


@pytest.mark.parametrize(
    ("flags", "sync", "main_grad"),
    [
        ((False, False, False), NO_SYNC, False),
        ((True, True, True), ALL_SYNC_AVG, True),
        ((True, False, True), ALL_SYNC_BCAST, False),
    ],
    ids=["plain-nosync", "allflags-syncavg-maingrad", "async-fused-syncbcast"],
)
def test_dp2_mp2_model_matches_single_process_on_the_full_batch(pools, flags, sync, main_grad):
    losses = pools(4).run(cases.train_matches_single_process, 2, 2, flags, sync, main_grad, timeout=120)
    assert losses[0][-1] < losses[0][0]  # it learns


def test_mp2_model_matches_single_process(pools):
    pools(2).run(cases.train_matches_single_process, 1, 2, (True, True, True), NO_SYNC, True)


@pytest.mark.parametrize(
    ("mode", "expected_bias", "expected_grad", "expected_moment"),
    [("broadcast", 0.0, 1.0, 0.1), ("average", 0.5, 1.5, 0.15)],
)
def test_sync_flags_make_replicated_values_agree(pools, mode, expected_bias, expected_grad, expected_moment):
    ranks = pools(2).run(cases.sync_flags_act, mode, True)
    for rank, r in enumerate(ranks):
        # Rank r started at base + r: after the sync every rank holds base + 0 (broadcast) or base + 0.5 (mean).
        offsets = [after - (before - rank) for after, before in zip(r["bias"], r["bias_before"])]
        assert offsets == pytest.approx([expected_bias] * 4, abs=1e-6)
        assert r["bias_grad"] == pytest.approx([expected_grad] * 4)
        assert r["bias_exp_avg"] == pytest.approx([expected_moment] * 4)
    # sharded parameters are never synced across the mp group
    assert [r["weight_grad"][0] for r in ranks] == [1.0, 2.0]
    assert [r["weight_exp_avg"][0] for r in ranks] == pytest.approx([0.1, 0.2])


def test_without_sync_flags_replicated_values_stay_apart(pools):
    ranks = pools(2).run(cases.sync_flags_act, "broadcast", False)
    assert [r["bias_grad"][0] for r in ranks] == [1.0, 2.0]
    assert [r["bias_exp_avg"][0] for r in ranks] == pytest.approx([0.1, 0.2])
    assert ranks[0]["bias"] != ranks[1]["bias"]


def test_bf16_parameters_are_updated_through_fp32_master_copies(pools):
    master_dtype, param_dtype, step = pools(2).run(cases.bf16_params_step_through_fp32_masters)[0]
    assert (master_dtype, param_dtype) == ("torch.float32", "torch.bfloat16")
    assert step == pytest.approx(1e-3, rel=1e-4)  # the fp32 update is exact; bf16 would round it


def test_zero_grad_without_set_to_none_does_not_double_main_grad(pools):
    assert pools(2).run(cases.optimizer_survives_zero_grad_without_set_to_none)[0] == [2.0, 2.0, 2.0]


def test_fp32_masters_follow_model_load_state_dict_and_checkpoints(pools):
    after_load, after_resume, saved = pools(2).run(cases.masters_follow_the_model_and_the_checkpoint)[0]
    assert after_load == 5.0  # weights loaded into the model after wrapping are not reverted
    assert after_resume == saved == 1.25  # the checkpoint's fp32 masters are restored


def test_dp_replicas_start_from_rank_0_and_unused_parameters_do_not_hang(pools):
    (used0, unused0), (used1, unused1) = pools(2).run(cases.dp_replicas_start_equal_and_tolerate_unused_parameters, timeout=30)
    assert used0 == used1 and unused0 == unused1
