"""The strategy's amp, gradient_merge and recompute, honoured by the runtime (gloo ranks)."""

from __future__ import annotations

import pytest

import training_cases as cases


def test_an_inf_on_one_rank_makes_every_rank_skip_and_halve_the_scale_then_grow_it(pools):
    logs = pools(4).run(cases.scaler_skips_together, 2, 2, timeout=120)  # dp 2 x mp 2
    assert all(log == logs[0] for log in logs)  # every rank took the same decisions
    # (scale after the step, skipped, parameters moved): the inf step is skipped and halves 1024; two clean
    # steps (incr_every_n_steps: 2) double it back.
    assert logs[0] == [(512.0, True, False), (512.0, False, True), (1024.0, False, True), (1024.0, False, True)]


def test_bf16_autocast_tracks_the_fp32_run(pools):
    fp32, bf16 = pools(2).run(cases.bf16_tracks_fp32, 2, 8, timeout=120)[0]
    assert bf16 != fp32  # it really ran in bf16
    assert bf16 == pytest.approx(fp32, rel=2e-2)  # stated tolerance: 2% over the first 8 steps
    assert bf16[-1] < bf16[0]


@pytest.mark.parametrize("fused", [False, True], ids=["unfused", "fused_main_grad"])
@pytest.mark.parametrize(("dp", "mp"), [(1, 2), (2, 2)], ids=["mp2", "dp2_mp2"])
def test_gradient_merge_k4_equals_one_step_on_the_4x_batch(pools, dp, mp, fused):
    counts = pools(dp * mp).run(cases.merge_equals_big_batch, mp, dp, fused, 4, timeout=120)[0]["counts"]
    # The dp gradient all-reduce (one flat buffer: every gradient is fp32) runs once per 4 micro-steps.
    assert counts == ([1, 1] if dp > 1 else [0, 0])


def test_recompute_gives_the_same_loss_and_grads_without_keeping_the_activations(pools):
    result = pools(2).run(cases.recompute_matches, 2)[0]
    plain, recomputed = result[False], result[True]
    assert recomputed["wrapped"] == ["down", "up"]
    assert recomputed["loss"] == plain["loss"]
    assert recomputed["saved"] < plain["saved"]


def test_recompute_without_names_recomputes_every_block_or_says_what_to_name(pools):
    result = pools(2).run(cases.recompute_without_names, 2)[0]
    assert result["wrapped"] == ["1.0", "1.1", "1.2"]  # the children of the model's ModuleList
    assert result["error"] == (
        "recompute is on and recompute_configs.checkpoints names no modules, so every block would be recomputed, but "
        "Parallel has no blocks (no Hugging Face _no_split_modules, no nn.ModuleList); name the modules to recompute "
        'with globs on module names, e.g. checkpoints: "emb"')


def test_the_example_strategy_with_bf16_recompute_and_merge_trains_the_demo(pools):
    from conftest import ROOT

    path = ROOT / "examples" / "strategies" / "mp2_bf16_recompute_merge.prototxt"
    result = pools(2).run(cases.example_strategy_trains, str(path), 8, timeout=120)[0]
    assert (result["amp"], result["merge"], result["recompute"]) == ("bfloat16", 2, ("blocks.*",))
    assert len(result["norms"]) == 4  # one clipped (merged) gradient per 2 steps
    assert result["losses"][-1] < result["losses"][0]
