"""ZeRO sharding on FSDP2 (gloo ranks): the same training as one process, 1/N of the model state per rank."""

from __future__ import annotations

import pytest

from conftest import assert_parity

import sharding_cases as cases

UNITS = ["", "blocks.0", "blocks.1", "blocks.2"]  # FSDP2 units: the root and each block


def _assert_sharded(result: dict, n: int, stage: int) -> None:
    """What this rank holds after a step, against the unsharded figures (FSDP2 pads a shard by at most a row)."""
    held, full = result["held"], result["unsharded"]
    slack = 1.25  # 11 vocabulary rows over 4 ranks: ceil(11 / 4) = 3 rows, not 2.75
    assert held["state"] <= slack * full["state"] / n
    if stage >= 2:
        assert held["grads"] <= slack * full["grads"] / n
    if stage == 3:
        assert held["params"] <= slack * full["params"] / n


@pytest.mark.parametrize("stage", [1, 2, 3])
@pytest.mark.parametrize("n", [2, 4])
def test_every_stage_trains_as_one_process_and_holds_a_1_over_n_share(pools, n, stage):
    result = pools(n).run(cases.parity, cases.sharded_text(n, stage), timeout=180)[0]
    assert_parity(result)
    _assert_sharded(result, n, stage)
    assert result["units"] == UNITS


@pytest.mark.parametrize("stage", [1, 3])
def test_dp2_x_sharding2_replicates_over_dp_and_shards_over_sharding_with_clipping(pools, stage):
    result = pools(4).run(cases.parity, cases.sharded_text(2, stage, dp=2), 3, 0.05, timeout=180)[0]
    assert_parity(result)
    assert len(result["norms"]) == 3 and result["norms"][0] > 0.05  # the clipping bit
    _assert_sharded(result, 2, stage)


def test_llama_mp2_x_sharding2_at_stage3_trains_as_one_process(pools):
    result = pools(4).run(cases.parity, cases.sharded_text(2, 3, mp=2), 3, None, "llama", 1e-5, timeout=240)[0]
    assert_parity(result)
    assert result["units"] == ["", "model.layers.0", "model.layers.1"]


@pytest.mark.parametrize(("stage", "reductions"), [(1, 4), (2, 8)])
def test_gradient_merge_reduces_once_per_update_at_stage1_and_every_micro_step_at_stage2(pools, stage, reductions):
    result = pools(2).run(cases.parity, cases.sharded_text(2, stage, merge=2), 3, 0.05, timeout=180)[0]
    assert_parity(result)
    # One reduce-scatter per FSDP2 unit (4 of them) per reduction; two micro-steps make one update.
    assert result["reductions"] == [reductions] * 3


def test_a_model_without_blocks_is_refused_before_anything_changes(pools):
    message, untouched = pools(2).run(cases.no_blocks_error)[0]
    assert message == (
        "hybrid_configs.sharding_degree is 2, but Sequential has no blocks to shard one by one: give the model a `_no_split_modules` list naming its block classes (as Hugging Face models have), "
        "or keep its blocks in an nn.ModuleList")
    assert untouched


def test_fp16_loss_scaling_skips_together_over_shards(pools):
    logs = pools(4).run(cases.scaler_skips_together_when_sharded, cases.sharded_text(2, 2, dp=2), timeout=120)
    assert all(log == logs[0] for log in logs)  # every rank took the same decisions
    assert logs[0] == [(512.0, True, False), (512.0, False, True), (1024.0, False, True), (1024.0, False, True)]


def test_the_sharded_example_strategy_trains_the_demo_in_bf16_with_fp32_master_shards(pools):
    from conftest import ROOT

    path = ROOT / "examples" / "strategies" / "mp2_sharding2_stage3_bf16.prototxt"
    result = pools(4).run(cases.example_strategy_trains, str(path), 6, timeout=240)[0]
    assert (result["stage"], result["amp"]) == (3, "bfloat16")
    assert result["param_dtypes"] == ["torch.float32"]  # the shards are the masters; FSDP2 computes in bf16
    assert result["units"] == ["", "blocks.0", "blocks.1"]
    assert result["losses"][-1] < result["losses"][0]  # and check_replicas passed every 2 steps


def test_the_sharded_example_strategy_fine_tunes_a_hugging_face_llama(pools):
    from conftest import ROOT

    path = ROOT / "examples" / "strategies" / "mp2_sharding2_stage3_bf16.prototxt"
    results = pools(4).run(cases.finetune_example_trains, str(path), 3, timeout=240)
    assert [r["data"] for r in results] == [(0, 2), (0, 2), (1, 2), (1, 2)]  # mp pairs share a batch
    assert results[0]["units"] == ["", "model.layers.0", "model.layers.1", "model.layers.2", "model.layers.3"]
    assert results[0]["losses"][-1] < results[0]["losses"][0]
