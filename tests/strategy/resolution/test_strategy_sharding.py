"""Sharding (ZeRO) on the strategy side: sharding_degree resolves, sharding_configs.stage is checked, every
sharding_configs field states what FSDP2 does with it, and model-state memory is what FSDP2 holds."""

from __future__ import annotations

import dataclasses

import pytest

import strategy
from conftest import ROOT, explain_rows
from strategy import StrategyError
from strategy.cli import main
from strategy.schema.json_schema import json_schema
from strategy.schema.reference import reference

LLAMA_4D = ROOT.parent / "shared" / "fixtures" / "paddle-hybrid" / "llama_4d.prototxt"


def resolve(text: str, world_size: int, **kwargs) -> strategy.Resolved:
    return strategy.resolve(strategy.loads(text), world_size=world_size, **kwargs)


def test_sharding_degree_2_resolves_under_the_strict_policy():
    r = resolve("hybrid_configs { dp_degree: 1 sharding_degree: 2 }", 2)
    assert (r.sharding_degree, r.sharding, r.degrees["sharding"]) == (2, strategy.ShardingSettings(stage=1), 2)
    assert r.process_groups()["sharding"] == [[0, 1]]


def test_dp_is_inferred_over_sharding():
    r = resolve("hybrid_configs { sharding_degree: 2 mp_degree: 2 }", 8)
    assert (r.dp_degree, r.sharding_degree, r.mp_degree) == (2, 2, 2)
    assert "hybrid_configs.dp_degree inferred as 2 from world size 8." in r.notes


def test_a_world_size_the_degrees_do_not_divide_is_an_error_naming_them():
    with pytest.raises(StrategyError) as info:
        resolve("hybrid_configs { dp_degree: 1 sharding_degree: 2 }", 4)
    assert str(info.value).startswith("the degrees dp_degree=1 × mp_degree=1 × pp_degree=1 × sharding_degree=2 × "
                                      "sep_degree=1 × cp_degree=1 multiply to 2, but the world size is 4")


def test_stage_defaults_to_1_as_paddles_dygraph_sharding():
    assert resolve("hybrid_configs { sharding_degree: 2 }", 2).sharding.stage == 1
    assert strategy.DistributedStrategy().hybrid_configs.sharding_configs.stage == 1


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_each_stage_resolves_with_its_fsdp2_switches(stage):
    r = resolve(f"hybrid_configs {{ sharding_degree: 2 sharding_configs {{ stage: {stage} }} }}", 2)
    assert r.sharding.stage == stage
    assert r.sharding.reshard_after_forward == (stage == 3)
    assert r.sharding.reduce_every_micro_step == (stage >= 2)


@pytest.mark.parametrize("stage", [0, 4, -1])
def test_a_stage_outside_1_to_3_is_an_error_at_its_line(write, stage):
    path = write("s.prototxt", f"hybrid_configs {{\n  sharding_degree: 2\n  sharding_configs {{\n    stage: {stage}\n  }}\n}}\n")
    with pytest.raises(StrategyError) as info:
        strategy.load(path)
    assert str(info.value) == f"{path}:4:5: hybrid_configs.sharding_configs.stage must be one of 1, 2, 3; got {stage}"
    assert info.value.field == "hybrid_configs.sharding_configs.stage"


def test_validate_reports_a_bad_stage_at_its_line(write, capsys):
    path = write("s.yaml", "hybrid_configs:\n  sharding_degree: 2\n  sharding_configs: {stage: 5}\n")
    assert main(["validate", str(path), "--world-size", "2"]) == 1
    assert capsys.readouterr().err.strip() == f"{path}:3:22: hybrid_configs.sharding_configs.stage must be one of 1, 2, 3; got 5"


def test_a_stage_set_in_code_is_checked_when_resolved():
    s = strategy.loads("hybrid_configs { sharding_degree: 2 }")
    s.hybrid_configs.sharding_configs.stage = 7
    with pytest.raises(StrategyError, match="hybrid_configs.sharding_configs.stage must be one of 1, 2, 3; got 7"):
        strategy.resolve(s, world_size=2)


def test_the_json_schema_bounds_the_stage():
    stage = json_schema()["$defs"]["DygraphShardingConfig"]["properties"]["stage"]
    assert (stage["minimum"], stage["maximum"], stage["default"]) == (1, 3, 1)


def test_at_sharding_degree_1_the_stage_is_kept_and_every_setting_is_noted():
    r = resolve("hybrid_configs { sharding_configs { stage: 3 split_param: true accumulate_steps: 4 } }", 1)
    assert r.sharding.stage == 3  # kept as configured; nothing shards
    assert "hybrid_configs.sharding_configs.stage is set but has no effect: hybrid_configs.sharding_degree is 1." in r.notes
    assert "hybrid_configs.sharding_configs.split_param is set but has no effect: hybrid_configs.sharding_degree is 1." in r.notes
    assert ("hybrid_configs.sharding_configs.accumulate_steps is set but has no effect: hybrid_configs.sharding_degree "
            "is 1.") in r.notes


def test_paddles_llama_sharding_configs_resolve_once_pp_is_left_out():
    s = strategy.load(LLAMA_4D, overrides=["hybrid_configs.pp_degree=1"])
    r = strategy.resolve(s, world_size=4)
    assert (r.mp_degree, r.sharding_degree, r.sharding.stage) == (2, 2, 1)
    assert any(n.startswith("hybrid_configs.sharding_configs.accumulate_steps is set, but this runtime decides it "
                            "itself: the micro-steps of one update are gradient_merge_configs.k_steps") for n in r.notes)


def test_an_always_on_flag_set_false_is_noted_with_what_fsdp2_does():
    r = resolve("hybrid_configs { sharding_degree: 2 sharding_configs { split_param: false comm_overlap: true } }", 2)
    assert ("hybrid_configs.sharding_configs.split_param is set to false but has no effect: FSDP2 splits every "
            "parameter evenly into per-rank shards (V2's layout); it has no whole-parameter mode.") in r.notes
    assert not any("comm_overlap" in n for n in r.notes)


def test_offload_is_not_implemented_and_says_so_at_its_line(write):
    path = write("o.prototxt", "hybrid_configs {\n  sharding_degree: 2\n  sharding_configs { offload_opt_buffer_size: 8 }\n}\n")
    with pytest.raises(StrategyError) as info:
        strategy.resolve(strategy.load(path), world_size=2)
    assert str(info.value) == (f"{path}:3:22: hybrid_configs.sharding_configs.offload_opt_buffer_size = 8 is not "
                               "implemented by this project; FSDP2's CPUOffloadPolicy is not wired yet: leave it at -1, and raise sharding_degree to hold less optimizer state per rank")


def test_explain_shows_each_sharding_configs_fields_status(capsys, write):
    path = write("s.prototxt", "hybrid_configs { sharding_degree: 2 sharding_configs { tensor_fusion: false "
                               "comm_buffer_size_MB: 512 stage: 2 } }")
    assert main(["explain", str(path), "--world-size", "4", "--all"]) == 0
    rows = explain_rows(capsys.readouterr().out)
    assert rows["hybrid_configs.sharding_degree"] == ["2", "set", ""]
    assert rows["hybrid_configs.sharding_configs.stage"] == ["2", "set", ""]
    assert rows["hybrid_configs.sharding_configs.comm_overlap"] == ["false", "default", "always on here (false has no effect)"]
    assert rows["hybrid_configs.sharding_configs.tensor_fusion"][:2] == ["false", "set"]
    assert rows["hybrid_configs.sharding_configs.tensor_fusion"][2].startswith(
        "always on here (false has no effect): FSDP2 communicates")
    assert rows["hybrid_configs.sharding_configs.comm_buffer_size_MB"][2].startswith("decided here: FSDP2 communicates")


def test_the_reference_gives_every_sharding_configs_field_its_status():
    section = reference().split("## DygraphShardingConfig\n")[1].split("\n## ")[0]
    status = {cells[1].strip("`"): cells[4] for cells in (line.split(" | ") for line in section.splitlines())
              if len(cells) > 4 and cells[1].startswith("`")}
    always_on = ["tensor_fusion", "comm_overlap", "split_param", "release_gradients", "free_grads_in_comm",
                 "use_reduce_avg"]
    decided = ["accumulate_steps", "fuse_optimizer", "comm_buffer_size_MB", "enable_fuse_optimizer_states"]
    not_implemented = ["offload_opt_buffer_size", "check_nccl_config"]
    assert {name for name in status if status[name] == "implemented, always on"} == set(always_on)
    assert {name for name in status if status[name].startswith("decided here: ")} == set(decided)
    assert {name for name in status if status[name].startswith("**not implemented**")} == set(not_implemented)
    assert not any(status[name].startswith("no effect") for name in status)  # Paddle's dygraph reads every one
    assert status["stage"] == status["nccl_config"] == "implemented"
    assert status["offload_opt_buffer_size"] == "**not implemented**: FSDP2's CPUOffloadPolicy is not wired yet: leave it at -1, and raise sharding_degree to hold less optimizer state per rank"
    assert len(status) == 14


def test_resolved_sharding_flattens_for_the_ranks_agreement():
    r = resolve("hybrid_configs { sharding_degree: 2 sharding_configs { stage: 3 } }", 2)
    assert dataclasses.asdict(r)["sharding"] == {"stage": 3}
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.sharding.stage = 1  # type: ignore[misc]


def test_resolve_prints_the_stage(capsys, write):
    path = write("s.prototxt", "hybrid_configs { sharding_degree: 2 sharding_configs { stage: 3 } }")
    assert main(["resolve", str(path), "--world-size", "2"]) == 0
    assert "sharding.stage: 3" in capsys.readouterr().out.splitlines()


# Bytes a parameter for Adam, P + G + K: ZeRO's (Rajbhandari et al., 2020, §3.1) without sharding; FSDP2 keeps fp32
# shards of all three between steps at every stage (measured in tests/strategy/planning/test_plan_memory.py).
def held(psi: float, n: int, mixed: bool) -> tuple[float, float, float]:
    if n > 1:
        return (4 * psi / n, 4 * psi / n, 8 * psi / n)
    p, g, k = (2, 2, 12) if mixed else (4, 4, 8)
    return (p * psi, g * psi, k * psi)


@pytest.mark.parametrize("mixed", [True, False])
@pytest.mark.parametrize("stage", [1, 2, 3])
@pytest.mark.parametrize("n", [1, 2, 4])
def test_model_state_memory_is_what_fsdp2_holds_between_steps(n, stage, mixed):
    amp = "amp: true amp_configs { use_pure_bf16: true } " if mixed else ""
    r = resolve(f"{amp}hybrid_configs {{ sharding_degree: {n} sharding_configs {{ stage: {stage} }} }}", n)
    m = r.model_state_memory(7e9)
    assert tuple(m.per_rank) == pytest.approx(held(7e9, n, mixed))
    assert tuple(m.unsharded) == pytest.approx(held(7e9, 1, mixed))
    assert m.unsharded.total == pytest.approx(16 * 7e9)


def test_stage_3_over_64_ranks_holds_a_64th_of_16_bytes_a_parameter():
    r = resolve("amp: true amp_configs { use_pure_fp16: true } "
                "hybrid_configs { sharding_degree: 64 sharding_configs { stage: 3 } }", 64)
    assert r.model_state_memory(7.5e9).per_rank.total == 16 * 7.5e9 / 64


def test_mp_and_pp_split_the_model_before_sharding():
    r = resolve("hybrid_configs { mp_degree: 2 sharding_degree: 2 }", 4)
    m = r.model_state_memory(1e9)
    assert m.per_rank == strategy.ModelStateBytes(parameters=1e9, gradients=1e9, optimizer=2e9)  # fp32 4, 4, 8 / 2 / 2


def test_autocast_without_pure_weights_counts_fp32_model_states():
    m = resolve("amp: true", 1).model_state_memory(1e9)
    assert m.per_rank == strategy.ModelStateBytes(parameters=4e9, gradients=4e9, optimizer=8e9)


@pytest.mark.parametrize("params", [0, -1.0, float("nan"), float("inf")])
def test_model_state_memory_needs_a_positive_parameter_count(params):
    with pytest.raises(ValueError, match="params must be a positive number"):
        resolve("", 1).model_state_memory(params)


def test_explain_params_prints_each_ranks_model_state_next_to_one_process(capsys, write):
    path = write("s.prototxt", "amp: true amp_configs { use_pure_bf16: true } "
                               "hybrid_configs { mp_degree: 2 sharding_degree: 4 sharding_configs { stage: 3 } }")
    assert main(["explain", str(path), "--world-size", "8", "--params", "7B"]) == 0
    out = capsys.readouterr().out
    assert out[out.index("model-state memory"):].splitlines() == [
        "model-state memory for 7,000,000,000 parameters (as this runtime holds them after a step):",
        "  fp32 weights (master copies under pure amp), gradients, Adam moments: 4 + 4 + 8 bytes a parameter",
        "  split over mp 2 × pp 1; FSDP2 keeps fp32 shards of weights, gradients and Adam state over sharding",
        "      4 between steps (stage 3; below 3 the whole weights are gathered from forward to backward)",
        "               parameters  gradients  Adam state       total",
        "  per rank       3.26 GiB   3.26 GiB    6.52 GiB   13.04 GiB",
        "  one process   13.04 GiB  13.04 GiB   78.23 GiB  104.31 GiB",
        "  (activations and the weights FSDP2 gathers during a step come on top: strategy plan and",
        "      strategy.estimate_memory count them for a model)",
    ]


def test_explain_params_without_sharding_counts_zeros_mixed_precision_bytes(capsys, write):
    path = write("s.prototxt", "amp: true amp_configs { use_pure_bf16: true }")
    assert main(["explain", str(path), "--world-size", "1", "--params", "1B"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "  bfloat16 weights and gradients, fp32 master weights and Adam moments: 2 + 2 + 12 bytes a parameter" in lines
    assert "  per rank       1.86 GiB   1.86 GiB   11.18 GiB  14.90 GiB" in lines


@pytest.mark.parametrize(("text", "value"), [("7e9", 7e9), ("7B", 7e9), ("1.3b", 1.3e9), ("125M", 125e6),
                                             ("350k", 350e3), ("2T", 2e12), ("7000000000", 7e9)])
def test_params_accepts_plain_and_suffixed_counts(text, value):
    from strategy.cli.common import _count

    assert _count(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["7x", "B", "0", "-7B", "nan", "inf", "1e400"])
def test_a_bad_params_value_is_a_usage_error_naming_the_flag(capsys, write, text):
    path = write("s.prototxt", "")
    with pytest.raises(SystemExit) as info:
        main(["explain", str(path), f"--params={text}"])
    assert info.value.code == 2
    assert "argument --params: expected a positive number of parameters such as 7e9, 7B or 125M" in capsys.readouterr().err
