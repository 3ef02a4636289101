"""Pipelines on the strategy side, what cannot run as written: micro-batch counts (run as GPipe with a warning, or
an error where no schedule runs them), schedules torch lacks, chunk counts, located at the field to change."""

from __future__ import annotations

import warnings

import pytest

import strategy
from pipeline_texts import DUALPIPEV_HINT, error_of, pipe, resolve
from strategy import StrategyError
from strategy.cli import main


@pytest.mark.parametrize(("pp", "mode", "virtual", "dualpipev", "steps", "text"), [
    (2, None, None, True, 3, "pipeline_configs.accumulate_steps = 3 is too few micro-batches for ScheduleDualPipeV "
     "(hybrid_configs.pp_configs.use_dualpipev: true) at hybrid_configs.pp_degree 2: it needs one per stage, at least "
     "4 (2 chunks per rank × pp_degree 2)" + DUALPIPEV_HINT),
    (2, "VPP", 2, False, 5, 'pipeline_configs.accumulate_steps = 5 does not suit ScheduleInterleaved1F1B '
     '(pipeline_configs.schedule_mode "VPP") at hybrid_configs.pp_degree 2: it runs the micro-batches in max(1, 5 // 2) '
     "= 2 rounds, and 5 is not a multiple of 2; set pipeline_configs.accumulate_steps: 4 or 6"),
    (4, "ZBH1", None, False, 10 + 1, 'pipeline_configs.accumulate_steps = 11 does not suit ScheduleInterleavedZeroBubble '
     '(pipeline_configs.schedule_mode "ZBH1") at hybrid_configs.pp_degree 4: it runs the micro-batches in max(1, 11 // 4) '
     "= 2 rounds, and 11 is not a multiple of 2; set pipeline_configs.accumulate_steps: 10 or 12"),
])
def test_micro_batches_no_schedule_runs_are_an_error_at_accumulate_steps(write, pp, mode, virtual, dualpipev, steps,
                                                                          text):
    path, error = error_of(write, pipe(pp, steps=steps, mode=mode, virtual=virtual, dualpipev=dualpipev), pp)
    row = path.read_text().splitlines().index(f"  accumulate_steps: {steps}") + 1
    assert str(error) == f"{path}:{row}:3: {text}"
    assert error.field == "pipeline_configs.accumulate_steps"


@pytest.mark.parametrize(("pp", "steps", "bubble", "more"), [(2, 1, "1/2 = 50%", "at 8: 1/9 = 11%"),
                                                             (4, 3, "3/6 = 50%", "at 16: 3/19 = 16%")])
def test_fewer_micro_batches_than_1f1b_stages_run_as_gpipe_with_a_warning_at_accumulate_steps(write, pp, steps, bubble,
                                                                                              more):
    path = write("p.prototxt", pipe(pp, steps=steps, mode="1F1B"))
    with pytest.warns(strategy.StrategyWarning) as caught:
        r = strategy.resolve(strategy.load(path), world_size=pp)
    text = (f'pipeline_configs.accumulate_steps = {steps} is fewer micro-batches than the {pp} stages of Schedule1F1B '
            f'(pipeline_configs.schedule_mode "1F1B") at hybrid_configs.pp_degree {pp}, so it runs as ScheduleGPipe '
            "(every forward, then every backward), whose bubble is the one 1F1B has with so few: (pp_degree - 1) / "
            f"(accumulate_steps + pp_degree - 1) = {bubble} of each step, the stages waiting on each other; set "
            f"pipeline_configs.accumulate_steps: {pp} or more to run 1F1B ({more})")
    row = path.read_text().splitlines().index(f"  accumulate_steps: {steps}") + 1
    assert [str(w.message) for w in caught] == [f"{path}:{row}:3: {text}"]
    assert (r.pipeline.schedule, r.pipeline.accumulate_steps, r.pipeline.num_stages) == ("ScheduleGPipe", steps, pp)
    assert text in r.notes


def test_a_pp_file_without_accumulate_steps_resolves_with_the_warning_at_pp_degree(write):
    path = write("p.prototxt", "hybrid_configs {\n  pp_degree: 2\n}\n")
    with pytest.warns(strategy.StrategyWarning, match=rf"^{path}:2:3: pipeline_configs.accumulate_steps = 1 \(its "
                                                      r"default\) is fewer micro-batches than the 2 stages of "
                                                      r"Schedule1F1B .* = 1/2 = 50% of each step, the stages waiting"):
        r = strategy.resolve(strategy.load(path), world_size=2)
    assert r.pipeline.schedule == "ScheduleGPipe"


@pytest.mark.parametrize("pipeline_configs", ["", "pipeline_configs { accumulate_steps: 1 }",
                                              'pipeline_configs { accumulate_steps: 8 schedule_mode: "FThenB" }',
                                              'pipeline_configs { accumulate_steps: 2 schedule_mode: "ZBVPP" }'])
def test_the_topology_groups_and_coordinates_never_depend_on_the_pipeline_settings(pipeline_configs):
    with warnings.catch_warnings():  # the few micro-batches' warning
        warnings.simplefilter("ignore", strategy.StrategyWarning)
        plain = resolve("hybrid_configs { dp_degree: 2 pp_degree: 2 mp_degree: 2 }", 8)
        r = resolve(f"hybrid_configs {{ dp_degree: 2 pp_degree: 2 mp_degree: 2 }} {pipeline_configs}", 8)
    assert r.topology == plain.topology
    assert r.process_groups() == plain.process_groups()
    assert [r.coordinates(rank) for rank in range(8)] == [plain.coordinates(rank) for rank in range(8)]


@pytest.mark.parametrize(("mode", "virtual", "steps"), [("FThenB", None, 1), ("FThenB", 2, 1), ("ZBVPP", None, 1),
                                                        ("1F1B", 2, 1), ("1F1B", 2, 3), ("ZBH1", None, 1)])
def test_schedules_that_run_few_micro_batches_take_them(mode, virtual, steps):
    assert resolve(pipe(steps=steps, mode=mode, virtual=virtual), 2).pipeline.accumulate_steps == steps


def test_vpp_without_a_virtual_degree_is_an_error_naming_it(write):
    path, error = error_of(write, pipe(steps=4, mode="VPP"))
    assert str(error) == (
        f'{path}:6:3: pipeline_configs.schedule_mode "VPP" runs ScheduleInterleaved1F1B, which needs at least two model '
        "chunks per rank, but hybrid_configs.pp_configs.virtual_pp_degree is 1; set virtual_pp_degree: 2 (or more), or "
        'schedule_mode: "1F1B"')
    assert error.field == "pipeline_configs.schedule_mode"


@pytest.mark.parametrize("mode", ["Eager1F1B", "ZBV", "1f1b", "interleaved"])
def test_a_schedule_torch_lacks_is_an_error_at_schedule_mode_naming_every_choice(write, mode):
    path, error = error_of(write, pipe(steps=4, mode=mode))
    message = str(error)
    assert message.startswith(
        f'{path}:6:3: pipeline_configs.schedule_mode "{mode}" is not a schedule torch.distributed.pipelining runs; use '
        '"1F1B" (Schedule1F1B; ScheduleInterleaved1F1B at virtual_pp_degree >= 2), "FThenB" (ScheduleGPipe; '
        'ScheduleLoopedBFS at virtual_pp_degree >= 2), "VPP" (ScheduleInterleaved1F1B, virtual_pp_degree >= 2), "ZBH1" '
        '(ScheduleInterleavedZeroBubble), "ZBVPP" (ScheduleZBVZeroBubble, two chunks per rank in a V), or '
        "hybrid_configs.pp_configs.use_dualpipev: true (ScheduleDualPipeV, two chunks per rank in a V)")
    assert error.field == "pipeline_configs.schedule_mode"
    if mode in ("Eager1F1B", "1f1b"):
        assert message.endswith("; did you mean '1F1B'?")


def test_a_schedule_torch_lacks_loads_and_converts_losslessly():
    s = strategy.loads(pipe(steps=4, mode="Eager1F1B"))
    assert strategy.loads(strategy.dumps(s, format="json"), format="json") == s


def test_under_warn_a_schedule_torch_lacks_runs_1f1b_with_a_located_warning():
    with pytest.warns(strategy.StrategyWarning, match=r'^<string>:6:3: pipeline_configs.schedule_mode "Eager1F1B" is '
                                                      r"not a schedule .*; running \"1F1B\" \(policy 'warn'\)$"):
        r = resolve(pipe(steps=4, mode="Eager1F1B"), 2, policy="warn")
    assert r.pipeline.schedule == "Schedule1F1B"


def test_dualpipev_with_three_chunks_is_an_error_at_virtual_pp_degree(write):
    path, error = error_of(write, pipe(steps=8, virtual=3, dualpipev=True))
    assert str(error) == (
        f"{path}:4:5: hybrid_configs.pp_configs.virtual_pp_degree = 3 does not fit ScheduleDualPipeV "
        "(hybrid_configs.pp_configs.use_dualpipev: true), which runs exactly two chunks per rank in a V; set "
        "virtual_pp_degree: 2, or leave it at 1")
    assert error.field == "hybrid_configs.pp_configs.virtual_pp_degree"


def test_zbvpp_with_three_chunks_is_the_same_error():
    with pytest.raises(StrategyError, match=r"virtual_pp_degree = 3 does not fit ScheduleZBVZeroBubble "
                                            r'\(pipeline_configs.schedule_mode "ZBVPP"\), which runs exactly two'):
        resolve(pipe(steps=8, mode="ZBVPP", virtual=3), 2)


@pytest.mark.parametrize(("text", "error"), [
    ("hybrid_configs {\n  pp_configs {\n    virtual_pp_degree: 0\n  }\n}\n",
     "<string>:3:5: hybrid_configs.pp_configs.virtual_pp_degree must be >= 1; got 0"),
    ("pipeline_configs {\n  accumulate_steps: 0\n}\n", "<string>:2:3: pipeline_configs.accumulate_steps must be >= 1; got 0"),
    ("pipeline_configs {\n  micro_batch_size: -2\n}\n", "<string>:2:3: pipeline_configs.micro_batch_size must be >= 1; got -2"),
])
def test_counts_below_1_are_errors_at_load(text, error):
    with pytest.raises(StrategyError) as info:
        strategy.loads(text)
    assert str(info.value) == error


def test_validate_reports_micro_batches_no_schedule_runs_at_the_line(write, capsys):
    path = write("p.yaml", "hybrid_configs:\n  pp_degree: 2\n  pp_configs:\n    use_dualpipev: true\n"
                           "pipeline_configs:\n  accumulate_steps: 2\n")
    assert main(["validate", str(path), "--world-size", "2"]) == 1
    assert capsys.readouterr().err.strip().startswith(
        f"{path}:6:3: pipeline_configs.accumulate_steps = 2 is too few micro-batches for ScheduleDualPipeV")


def test_validate_passes_fewer_micro_batches_than_1f1b_stages_with_the_warning(write, capsys):
    path = write("p.yaml", "hybrid_configs:\n  pp_degree: 4\npipeline_configs:\n  accumulate_steps: 2\n")
    assert main(["validate", str(path), "--world-size", "4"]) == 0
    out = capsys.readouterr()
    assert out.out == f"{path}: ok\n"
    assert out.err.startswith(f"strategy: warning: {path}:4:3: pipeline_configs.accumulate_steps = 2 is fewer "
                              "micro-batches than the 4 stages of Schedule1F1B")
