"""Pipelines on the strategy side: pp_degree resolves, pipeline_configs takes effect with it, schedule_mode,
virtual_pp_degree and use_dualpipev choose a torch.distributed.pipelining schedule, and every pp_configs /
pipeline_configs field states what torch's pipelining does (errors and warnings: test_strategy_pipeline_errors.py)."""

from __future__ import annotations

import dataclasses
import warnings

import pytest

import strategy
from conftest import ROOT, explain_rows
from pipeline_texts import DUALPIPEV_HINT, error_of, pipe, resolve
from strategy import PipelineSettings, StrategyError
from strategy.cli import main
from strategy.resolution.pipeline import DUALPIPEV, MODES, describe
from strategy.schema.reference import reference

LLAMA_4D = ROOT.parent / "shared" / "fixtures" / "paddle-hybrid" / "llama_4d.prototxt"


# -- resolving ---------------------------------------------------------------------------------------------------

def test_pp_degree_2_resolves_under_the_strict_policy():
    r = resolve(pipe(steps=4), 2)
    assert (r.pp_degree, r.dp_degree, r.degrees["pp"]) == (2, 1, 2)
    assert r.pipeline == PipelineSettings(pp_degree=2, micro_batch_size=1, accumulate_steps=4, virtual_pp_degree=1,
                                          schedule="Schedule1F1B", placement="loop")
    assert r.process_groups()["pp"] == [[0, 1]]


def test_dp_is_inferred_over_pp():
    r = resolve("hybrid_configs { pp_degree: 2 mp_degree: 2 } pipeline_configs { accumulate_steps: 2 }", 8)
    assert (r.dp_degree, r.pp_degree, r.mp_degree) == (2, 2, 2)


def test_pipeline_configs_take_effect_once_pp_degree_is_above_1():
    r = resolve(pipe(steps=8, configs=("micro_batch_size: 2",)), 2)
    assert (r.pipeline.micro_batch_size, r.pipeline.accumulate_steps, r.pipeline.samples_per_step) == (2, 8, 16)
    assert not any(n.startswith("pipeline_configs.") for n in r.notes)


def test_at_pp_degree_1_the_pipeline_is_the_default_and_its_settings_are_noted():
    r = resolve('pipeline_configs { accumulate_steps: 4 schedule_mode: "VPP" } '
                "hybrid_configs { pp_configs { virtual_pp_degree: 2 use_dualpipev: true } }", 1)
    assert r.pipeline == PipelineSettings()
    assert r.pipeline.accumulate_steps == 1 and r.pipeline.schedule == "Schedule1F1B"
    assert ("pipeline_configs.accumulate_steps is set but has no effect: pipeline is false and "
            "hybrid_configs.pp_degree is 1.") in r.notes
    assert ("pipeline_configs.schedule_mode is set but has no effect: pipeline is false and hybrid_configs.pp_degree "
            "is 1.") in r.notes
    assert ("hybrid_configs.pp_configs.virtual_pp_degree is set but has no effect: hybrid_configs.pp_degree "
            "is 1.") in r.notes
    assert "hybrid_configs.pp_configs.use_dualpipev is set but has no effect: hybrid_configs.pp_degree is 1." in r.notes


def test_paddles_llama_4d_resolves_strictly_on_8_ranks():
    r = strategy.resolve(strategy.load(LLAMA_4D), world_size=8)
    assert r.degrees == {"dp": 1, "pp": 2, "sharding": 2, "sep": 1, "cp": 1, "mp": 2}
    assert r.pipeline == PipelineSettings(pp_degree=2, micro_batch_size=1, accumulate_steps=4, virtual_pp_degree=1,
                                          schedule="Schedule1F1B", placement="loop", delay_scale_loss=True)
    assert r.sharding.stage == 1 and r.mp.async_allreduce and r.mp.fused_linear_param_grad_add
    assert (r.amp.enabled, r.amp.dtype, r.amp.pure) == (True, "bfloat16", True)
    assert r.recompute == strategy.RecomputeSettings(enabled=True, checkpoints=())  # every block
    assert r.process_groups()["pp"] == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert [n.split(" is set")[0] for n in r.notes if " is set" in n] == [
        "hybrid_configs.sharding_configs.accumulate_steps", "amp_configs.init_loss_scaling"]
    assert r.pipeline.delay_scale_loss  # Paddle's 4-D run leaves each micro-batch's loss whole, and so does this one
    assert not any("release_gradients" in n or "dp_comm_overlap" in n for n in r.notes)  # always on; the default


@pytest.mark.parametrize("fmt", ["binpb", "json"])
def test_paddles_llama_4d_resolves_the_same_from_each_format(fmt):
    s = strategy.load(LLAMA_4D.with_suffix(f".{fmt}"))
    assert strategy.resolve(s, world_size=8).pipeline == strategy.resolve(strategy.load(LLAMA_4D), world_size=8).pipeline


def test_resolved_pipeline_flattens_for_the_ranks_agreement():
    r = resolve(pipe(steps=4, dualpipev=True), 2)
    assert dataclasses.asdict(r)["pipeline"] == {
        "pp_degree": 2, "micro_batch_size": 1, "accumulate_steps": 4, "virtual_pp_degree": 2,
        "schedule": "ScheduleDualPipeV", "placement": "v", "shapes": "fixed", "dp_comm_overlap": False,
        "delay_scale_loss": False, "timer": False, "profiling": False}
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.pipeline.accumulate_steps = 1  # type: ignore[misc]


def test_resolve_prints_the_schedule(capsys, write):
    path = write("p.prototxt", pipe(steps=4, virtual=2))
    assert main(["resolve", str(path), "--world-size", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "pipeline.schedule: \"ScheduleInterleaved1F1B\"" in out and "pipeline.virtual_pp_degree: 2" in out


# -- the schedule mapping ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("mode", "virtual", "dualpipev", "schedule", "chunks", "placement"), [
    (None, None, False, "Schedule1F1B", 1, "loop"),
    ("1F1B", 1, False, "Schedule1F1B", 1, "loop"),
    ("1F1B", 2, False, "ScheduleInterleaved1F1B", 2, "loop"),
    ("1F1B", 3, False, "ScheduleInterleaved1F1B", 3, "loop"),
    ("FThenB", None, False, "ScheduleGPipe", 1, "loop"),
    ("FThenB", 2, False, "ScheduleLoopedBFS", 2, "loop"),
    ("VPP", 2, False, "ScheduleInterleaved1F1B", 2, "loop"),
    ("VPP", 4, False, "ScheduleInterleaved1F1B", 4, "loop"),
    ("ZBH1", None, False, "ScheduleInterleavedZeroBubble", 1, "loop"),
    ("ZBH1", 2, False, "ScheduleInterleavedZeroBubble", 2, "loop"),
    ("ZBVPP", None, False, "ScheduleZBVZeroBubble", 2, "v"),
    ("ZBVPP", 2, False, "ScheduleZBVZeroBubble", 2, "v"),
    (None, None, True, "ScheduleDualPipeV", 2, "v"),
    (None, 2, True, "ScheduleDualPipeV", 2, "v"),
])
def test_schedule_mode_virtual_pp_degree_and_use_dualpipev_choose_the_torch_schedule(
        mode, virtual, dualpipev, schedule, chunks, placement):
    p = resolve(pipe(steps=8, mode=mode, virtual=virtual, dualpipev=dualpipev), 2).pipeline
    assert (p.schedule, p.virtual_pp_degree, p.placement, p.num_stages) == (schedule, chunks, placement, 2 * chunks)


def test_use_dualpipev_wins_over_the_schedule_mode_with_a_note():
    r = resolve(pipe(steps=4, mode="FThenB", dualpipev=True), 2)
    assert r.pipeline.schedule == "ScheduleDualPipeV"
    assert ('pipeline_configs.schedule_mode "FThenB" is set but has no effect: hybrid_configs.pp_configs.use_dualpipev '
            "runs ScheduleDualPipeV (Paddle checks use_dualpipev first too).") in r.notes


def test_every_mode_names_classes_torch_ships():
    pipelining = pytest.importorskip("torch.distributed.pipelining")
    for mode in [*MODES.values(), DUALPIPEV]:
        for name in filter(None, (mode.single, mode.looped)):
            assert hasattr(pipelining, name), name


@pytest.mark.parametrize(("placement", "virtual", "pp", "stages"), [
    ("loop", 1, 2, [(0,), (1,)]),
    ("loop", 2, 2, [(0, 2), (1, 3)]),
    ("loop", 3, 2, [(0, 2, 4), (1, 3, 5)]),
    ("v", 2, 2, [(0, 3), (1, 2)]),
    ("v", 2, 4, [(0, 7), (1, 6), (2, 5), (3, 4)]),
])
def test_stages_of_each_pp_rank_and_back(placement, virtual, pp, stages):
    p = PipelineSettings(pp_degree=pp, virtual_pp_degree=virtual, placement=placement)
    assert [p.stages_of(r) for r in range(pp)] == stages
    assert [p.pp_rank_of(s) for s in range(p.num_stages)] == [r for s in range(p.num_stages)
                                                               for r in range(pp) if s in stages[r]]


def test_stages_of_a_rank_outside_the_pipeline_is_a_value_error():
    with pytest.raises(ValueError, match=r"pp_rank must be in \[0, 2\), got 2"):
        PipelineSettings(pp_degree=2).stages_of(2)


# -- explain -------------------------------------------------------------------------------------------------------

def pipeline_section(text: str) -> list[str]:
    return text[text.index("\npipeline: ") + 1:].split("\n\n")[0].splitlines()


def test_explain_shows_the_schedule_the_stages_of_each_rank_and_a_step():
    text = strategy.explain(strategy.load(LLAMA_4D), world_size=8)
    assert pipeline_section(text) == [
        "pipeline: torch.distributed.pipelining.Schedule1F1B, 2 stages over pp 2 (one per rank)",
        "  pp rank 0: stage 0",
        "  pp rank 1: stage 1",
        "  a step: 4 micro-batches × 1 sample = 4 samples per data rank, 8 over 2 data ranks (dp × sharding)",
    ]


def test_explain_shows_a_v_of_stages_for_dualpipev():
    text = strategy.explain(strategy.loads(pipe(steps=8, dualpipev=True, configs=("micro_batch_size: 2",))),
                            world_size=4)
    assert pipeline_section(text) == [
        "pipeline: torch.distributed.pipelining.ScheduleDualPipeV, 4 stages over pp 2 (in a V)",
        "  pp rank 0: stages 0, 3",
        "  pp rank 1: stages 1, 2",
        "  a step: 8 micro-batches × 2 samples = 16 samples per data rank, 32 over 2 data ranks (dp ×",
        "      sharding)",
    ]


def test_explain_shows_an_interleaved_loop():
    text = strategy.explain(strategy.loads(pipe(steps=4, virtual=2)), world_size=2)
    assert pipeline_section(text)[:3] == [
        "pipeline: torch.distributed.pipelining.ScheduleInterleaved1F1B, 4 stages over pp 2 (in a loop)",
        "  pp rank 0: stages 0, 2",
        "  pp rank 1: stages 1, 3",
    ]


def test_explain_says_why_a_pipeline_cannot_run_instead_of_failing(capsys, write):
    path = write("p.prototxt", pipe(steps=3, dualpipev=True))
    assert main(["explain", str(path), "--world-size", "2"]) == 0
    section = pipeline_section(capsys.readouterr().out)
    at = next(k for k, line in enumerate(section) if line.startswith("  cannot run"))
    assert all(line.startswith("    ") for line in section[at + 1:])  # folded, each line after the first indented
    assert " ".join(line.strip() for line in section[at:]) == (
        f"cannot run (an error when resolved): {path}:8:3: pipeline_configs.accumulate_steps = 3 is too few "
        "micro-batches for ScheduleDualPipeV (hybrid_configs.pp_configs.use_dualpipev: true) at hybrid_configs.pp_degree "
        "2: it needs one per stage, at least 4 (2 chunks per rank × pp_degree 2)" + DUALPIPEV_HINT)


def test_explain_has_no_pipeline_section_at_pp_degree_1():
    assert "\npipeline: " not in strategy.explain(strategy.loads("pipeline_configs { accumulate_steps: 4 }"), world_size=1)


def test_explain_rows_of_the_pipeline_fields(capsys, write):
    path = write("p.prototxt", pipe(steps=4, configs=("p2p_cache_shape: false", "enable_partial_send_recv: false")))
    assert main(["explain", str(path), "--world-size", "2", "--all"]) == 0
    rows = explain_rows(capsys.readouterr().out)
    assert rows["hybrid_configs.pp_degree"] == ["2", "set", ""]
    assert rows["pipeline_configs.accumulate_steps"] == ["4", "set", ""]
    assert rows["hybrid_configs.pp_configs.overlap_p2p_comm"] == ["false", "default", "always on here (false has no effect)"]
    assert rows["pipeline_configs.p2p_cache_shape"] == ["false", "set", "off"]  # stages built for each batch shape
    assert rows["pipeline_configs.enable_partial_send_recv"][2].startswith("decided here: torch's PipelineStage")
    assert rows["hybrid_configs.pp_configs.virtual_pp_degree"] == ["1", "default", ""]


def test_explain_shows_always_on_pipeline_fields_off_while_inactive(capsys, write):
    path = write("p.prototxt", "")
    assert main(["explain", str(path), "--world-size", "1", "--all"]) == 0
    rows = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert rows["hybrid_configs.pp_configs.release_gradients"] == ["false", "default", "off"]


# -- statuses --------------------------------------------------------------------------------------------------------

def statuses(message: str) -> dict[str, str]:
    section = reference().split(f"## {message}\n")[1].split("\n## ")[0]
    return {cells[1].strip("`"): cells[4] for cells in (line.split(" | ") for line in section.splitlines())
            if len(cells) > 4 and cells[1].startswith("`")}


def test_the_reference_gives_every_pp_configs_field_its_status():
    status = statuses("PpConfig")
    always_on = {"release_gradients", "overlap_p2p_comm"}
    implemented = {"use_dualpipev", "coll_nccl_config", "p2p_nccl_config", "virtual_pp_degree", "clear_every_step_cache",
                   "enable_dynamic_shape", "dp_comm_overlap", "delay_scale_loss", "enable_timer", "profiling"}
    decided = {"use_batch_p2p_comm"}
    not_implemented = {"sharding_comm_overlap", "best_unbalanced_scheduler",
                       "enable_offload_queue", "forward_backward_overlap_scheduler",
                       "shared_nccl_config", "sync_param", "sync_moment", "sync_mode"}
    assert {n for n, s in status.items() if s == "implemented, always on"} == always_on
    assert {n for n, s in status.items() if s == "implemented"} == implemented
    assert {n for n, s in status.items() if s.startswith("decided here: ")} == decided
    assert not any(s.startswith("no effect") for s in status.values())  # Paddle's dygraph reads every one
    assert {n for n, s in status.items() if s.startswith("**not implemented**: ")} == not_implemented
    assert len(status) == 21
    for name in ("shared_nccl_config", "sync_param", "sync_moment", "sync_mode"):  # tied weights train under pp
        assert "embedding group" in status[name] and "untie" not in status[name]


def test_the_reference_gives_every_pipeline_configs_field_its_status():
    status = statuses("PipelineConfig")
    assert status == {"micro_batch_size": "implemented", "accumulate_steps": "implemented",
                      "schedule_mode": "implemented", "p2p_cache_shape": "implemented",
                      "enable_partial_send_recv": status["enable_partial_send_recv"]}
    assert status["enable_partial_send_recv"].startswith("decided here: torch's PipelineStage sends each mp rank's whole")


def test_the_reference_says_when_pipeline_configs_take_effect():
    row = next(line for line in reference().splitlines() if line.startswith("| 106 | `pipeline_configs` |"))
    assert row.endswith("*(active when `pipeline` is true or `hybrid_configs.pp_degree` > 1)* |")
    assert "| implemented |" in row


def test_what_paddle_users_set_for_pipelines_states_its_status_when_set(write):
    path, error = error_of(write, pipe(steps=4, pp_configs=("dp_comm_overlap: true", "sync_param: true")))
    assert str(error).splitlines() == [
        f"{path}:5:5: hybrid_configs.pp_configs.sync_param = true is not implemented by this project; the two copies "
        "of a weight tied across stages (tied embeddings) never drift: each update sums their gradients over the "
        "embedding group (the first and last stage's ranks), so both take the same step from the same values; leave it "
        "false",
    ]


def test_set_false_an_always_on_pipeline_flag_is_noted():
    r = resolve(pipe(steps=4, pp_configs=("overlap_p2p_comm: false",)), 2)
    assert any(n.startswith("hybrid_configs.pp_configs.overlap_p2p_comm is set to false but has no effect: torch's "
                            "schedules post sends and receives asynchronously") for n in r.notes)


def test_the_pipeline_switch_points_at_pp_degree():
    with pytest.raises(StrategyError, match=r"pipeline = true is not implemented by this project; set "
                                            r"hybrid_configs.pp_degree instead"):
        resolve("pipeline: true pipeline_configs { accumulate_steps: 2 }", 1)


def test_no_warning_for_a_clean_pipeline():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resolve(pipe(steps=4, mode="ZBH1", virtual=2), 2)


# -- docs/pipelines.md's table -------------------------------------------------------------------------------------

def test_the_pipeline_guides_schedule_table_is_the_mapping():
    lines = (ROOT / "docs" / "pipelines.md").read_text().splitlines()
    cells = {row[0]: row[1] for row in ([c.strip() for c in line.strip("|").split("|")] for line in lines
                                        if line.startswith("| `schedule_mode: ") or line.startswith("| `pp_configs."))}
    expected = {f'`schedule_mode: "{name}"`': describe(mode) for name, mode in MODES.items()}
    assert {key.removesuffix(" (default)"): value for key, value in cells.items() if "schedule_mode" in key} == expected
    assert cells["`pp_configs.use_dualpipev: true`"] == describe(DUALPIPEV)
