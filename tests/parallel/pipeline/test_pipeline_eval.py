"""Pipeline evaluation (gloo ranks): eval_batch on every schedule equals one process on the same weights and changes
no parameter; the V schedules' workaround is pinned to the torch releases that need it."""

from __future__ import annotations

import pytest
import torch

from rank_helpers import pp_text
import pipeline_eval_cases as eval_cases
from parallel.pipeline.evaluation import needs_forward_only_v


@pytest.mark.parametrize(("text", "schedule"), [
    (pp_text(2), "Schedule1F1B"),
    (pp_text(2, schedule="FThenB"), "ScheduleGPipe"),
    (pp_text(2, schedule="VPP", virtual=2), "ScheduleInterleaved1F1B"),
    (pp_text(2, schedule="ZBH1"), "ScheduleInterleavedZeroBubble"),
    (pp_text(2, schedule="ZBVPP"), "ScheduleZBVZeroBubble"),
    (pp_text(2, dualpipev=True), "ScheduleDualPipeV"),
], ids=["1F1B", "FThenB", "VPP", "ZBH1", "ZBVPP", "DualPipeV"])
def test_eval_batch_after_training_equals_one_process_and_changes_no_parameter(pools, text, schedule):
    results = pools(2).run(eval_cases.llama_eval, text, timeout=240)
    assert results[0]["schedule"] == schedule
    for r in results:  # every rank returns the loss; evaluation after more training follows the new weights
        assert r["losses"] == pytest.approx(results[0]["refs"], rel=1e-5)
        assert r["changed"] == []
    assert results[0]["losses"][0] != pytest.approx(results[0]["losses"][1], rel=1e-5)


@pytest.mark.parametrize("name", ["ScheduleDualPipeV", "ScheduleZBVZeroBubble"])
def test_torchs_own_v_schedules_fail_to_evaluate_exactly_on_the_releases_worked_around(pools, name):
    """When a torch release evaluates a V forward only, this fails: set evaluation.V_EVAL_FIXED_IN to it."""
    result = pools(1).run(eval_cases.torch_v_eval, name, timeout=60)[0]
    assert result["ForwardOnlyV"] == pytest.approx(result["direct"], rel=1e-6)
    if needs_forward_only_v("v"):
        assert result[name] == "AssertionError: can't steal_bwd_input if this stage doesn't have backward", \
            f"torch {torch.__version__} evaluates {name} forward only: set V_EVAL_FIXED_IN"
    else:
        assert result[name] == pytest.approx(result["direct"], rel=1e-6)


def test_the_workaround_applies_to_v_placements_before_the_fixed_release(monkeypatch):
    from parallel.pipeline import evaluation

    assert not needs_forward_only_v("loop")
    monkeypatch.setattr(evaluation, "V_EVAL_FIXED_IN", "2.14.0")
    assert needs_forward_only_v("v", "2.13.0") and not needs_forward_only_v("v", "2.14.0")
    assert not needs_forward_only_v("v", "2.15.1+cu128")
