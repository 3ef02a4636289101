"""The main job: examples/train_gpt.py trains the same with tensor parallelism as in one process, and its
torchrun command writes the strategy, loss curve, summary and a trace that shows the overlap."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import strategy
import example_cases as cases
from conftest import ROOT

STEPS = 6


@pytest.fixture(scope="module")
def single_process_losses(pools):
    return pools(1).run(cases.train_gpt, 1, 1, (False, False, False), STEPS)[0]


@pytest.mark.parametrize("flags", [(False, False, False), (True, False, False), (True, True, True)], ids=["plain", "async", "all"])
def test_mp2_loss_curve_matches_mp1(pools, single_process_losses, flags):
    losses = pools(2).run(cases.train_gpt, 2, 1, flags, STEPS)
    assert losses[0] == losses[1]  # every rank reports the same global loss
    assert losses[0] == pytest.approx(single_process_losses, rel=1e-5)
    assert losses[0][-1] < losses[0][0]


@pytest.mark.parametrize("extra", [{}, {"sp_async_reduce_scatter": True, "recompute_allgather": True}], ids=["sp", "sp_all"])
def test_mp2_sequence_parallel_loss_curve_matches_mp1(pools, single_process_losses, extra):
    losses = pools(2).run(cases.train_gpt, 2, 1, (True, True, True), STEPS, {"sequence_parallel": True, **extra})
    assert losses[0] == losses[1]
    assert losses[0] == pytest.approx(single_process_losses, rel=1e-5)


def test_dp2_mp2_with_sync_flags_matches_mp1(pools, single_process_losses):
    sync = {"sync_param": True, "sync_grad": True, "sync_moment": True, "sync_mode": "average"}
    losses = pools(4).run(cases.train_gpt, 2, 2, (True, True, True), STEPS, sync, timeout=180)
    assert losses[0] == pytest.approx(single_process_losses, rel=1e-5)


@pytest.mark.timeout(300)
def test_torchrun_demo_writes_its_outputs_and_a_trace_with_overlap(tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           str(ROOT / "examples" / "train_gpt.py"), "--strategy", str(ROOT / "examples" / "strategies" / "mp2_all_flags.prototxt"),
           "--steps", "8", "--batch-size", "8", "--seq-len", "32", "--out", str(out), "--trace",
           "--set", "hybrid_configs.mp_configs.sync_grad=true", "--check-replicas", "2"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=280, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {line.split()[0]: line.split()[1:] for line in result.stdout.splitlines() if line.startswith("hybrid_configs.")}
    assert rows["hybrid_configs.mp_configs.mp_async_allreduce"] == ["true", "set", "on"]  # strategy explain's view
    assert rows["hybrid_configs.mp_configs.sync_grad"] == ["true", "set", "on"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 8 and len(summary["losses"]) == 8
    assert len(summary["grad_norms"]) == 8 and all(n > 0 for n in summary["grad_norms"])  # clipped at 1.0
    assert summary["tokens_per_second"] > 0
    effective = strategy.load(out / "strategy.prototxt")
    assert effective.hybrid_configs.mp_configs.sync_grad  # the override went through
    assert (out / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    trace = json.loads((out / "trace_rank0.json").read_text())
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    comm = [e for e in events if e["name"] == "gloo:all_reduce"]
    dw = [e for e in events if e["name"].startswith("ColumnParallelLinear.dW")]
    assert dw and comm
    overlapping = [d for d in dw if any(c["ts"] < d["ts"] + d["dur"] and d["ts"] < c["ts"] + c["dur"] for c in comm)]
    assert overlapping, "no dW matmul ran while a dx all-reduce was in flight"


def test_a_bad_strategy_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("hybrid_configs: {mp_degre: 2}\n")
    cmd = [sys.executable, str(ROOT / "examples" / "train_gpt.py"), "--strategy", str(bad)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr.strip() == f"{bad}:1:18: unknown field hybrid_configs.mp_degre; did you mean 'mp_degree'?"


def test_outputs_are_written_before_the_plot_and_a_missing_plotting_library_only_warns(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import train_gpt
    finally:
        sys.path.remove(str(ROOT / "examples"))
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    summary = {"losses": [2.0, 1.5], "world_size": 1}
    with pytest.warns(UserWarning, match=r"loss.png not drawn .*summary.json has the losses"):
        train_gpt.write_outputs(tmp_path, summary, strategy.DistributedStrategy())
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
    assert (tmp_path / "strategy.prototxt").exists() and not (tmp_path / "loss.png").exists()


def test_a_resumed_runs_loss_plot_numbers_its_steps_from_where_it_resumed(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import train_gpt
    finally:
        sys.path.remove(str(ROOT / "examples"))
    from matplotlib.figure import Figure

    drawn: list[Figure] = []
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: drawn.append(self))
    summary = {"losses": [2.0, 1.5, 1.2], "world_size": 2, "first_step": 100}
    train_gpt.write_outputs(tmp_path, summary, strategy.DistributedStrategy())
    lines = drawn[0].axes[0].get_lines()
    assert list(lines[0].get_xdata()) == [101, 102, 103]  # steps 101-103, not 1-3
    assert any(line.get_label() == "resumed after step 100" for line in lines)
