"""Runs that survive failure: a real torchrun job of examples/train_gpt.py whose rank 1 this test SIGKILLs after its
first checkpoint is restarted by torchrun (--max-restarts 1, the same command) and ends exactly where a run that was
never interrupted ends: parameters and optimizer state bit for bit, and the same loss at every step after the
restart."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import ROOT

STEPS, EVERY = 16, 2  # the kill lands right after step 2's save, long before the end
LAYOUTS = {
    "dp2": "hybrid_configs { dp_degree: 2 }",
    "mp2": "hybrid_configs { mp_degree: 2 }",
    "sharding2_stage3": "hybrid_configs { sharding_degree: 2 sharding_configs { stage: 3 } }",
    "pp2": "hybrid_configs { pp_degree: 2 } pipeline_configs { micro_batch_size: 2 accumulate_steps: 4 }",
    "sep2": "hybrid_configs { sep_degree: 2 }",
}


def _strategy(tmp: Path, layout: str, async_save: bool) -> Path:
    path = tmp / "strategy.prototxt"
    path.write_text(f"{layout}\ncheckpoint_configs {{ dir: \"checkpoints\" every_steps: {EVERY} keep_last: 3 "
                    f"async_save: {str(async_save).lower()} }}\n")
    return path


def _command(strategy_file: Path, out: Path, *restarts: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", *restarts,
            str(ROOT / "examples" / "train_gpt.py"), "--strategy", str(strategy_file), "--steps", str(STEPS),
            "--batch-size", "8", "--seq-len", "32", "--out", str(out)]


def _rank_pid(agent: int, rank: int) -> int | None:
    """The pid of the worker with RANK=`rank` among the torchrun agent's children."""
    try:
        children = Path(f"/proc/{agent}/task/{agent}/children").read_text().split()
    except OSError:
        return None
    for pid in children:
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"RANK={rank}".encode() in env:
            return int(pid)
    return None


def _killed_run(strategy_file: Path, out: Path) -> tuple[subprocess.CompletedProcess, int]:
    """The job under torchrun --max-restarts 1; rank 1 SIGKILLed once the first checkpoint is complete."""
    log = open(out.parent / f"{out.name}.log", "w+")
    job = subprocess.Popen(_command(strategy_file, out, "--max-restarts", "1", "--monitor-interval", "0.1"),
                           stdout=log, stderr=subprocess.STDOUT, cwd=out.parent, start_new_session=True)
    first = out / "checkpoints" / f"step-{EVERY}" / "checkpoint.json"
    victim, deadline = None, time.monotonic() + 120
    try:
        while victim is None and job.poll() is None and time.monotonic() < deadline:
            if first.exists():
                victim = _rank_pid(job.pid, 1)
                if victim is not None:
                    os.kill(victim, signal.SIGKILL)
                    break
            time.sleep(0.005)
        job.wait(timeout=180)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    log.seek(0)
    return subprocess.CompletedProcess(job.args, job.returncode, log.read(), ""), victim or 0


def _tensors(checkpoint: Path) -> dict[str, torch.Tensor]:
    """Every tensor of a checkpoint (model and optimizer), read in this one process."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.default_planner import _EmptyStateDictLoadPlanner
    from torch.distributed.checkpoint.state_dict_loader import _load_state_dict

    state: dict = {}
    _load_state_dict(state, storage_reader=FileSystemReader(str(checkpoint)), planner=_EmptyStateDictLoadPlanner(),
                     no_dist=True)
    flat: dict[str, torch.Tensor] = {}

    def walk(prefix: str, value) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}{k}.", v)
        elif torch.is_tensor(value):
            flat[prefix.rstrip(".")] = value

    walk("", state)
    return flat


# Background saves on plain tensors and on FSDP2's DTensors; the other layouts differ from those only in what the
# foreground save already covers (the state a save takes is the same either way).
BACKGROUND = {"dp2", "sharding2_stage3"}


# `make test` kills and restarts one layout (plain tensors, saved in the foreground and in the background); the others,
# the same check at more layouts, under `make test-long`.
SHORT = {"dp2"}


@pytest.mark.timeout(400)
@pytest.mark.parametrize("name", [n if n in SHORT else pytest.param(n, marks=pytest.mark.long) for n in LAYOUTS])
def test_a_rank_killed_after_a_checkpoint_is_restarted_and_ends_as_if_never_interrupted(tmp_path, name):
    """One run straight; then the same killed and restarted, saving in the foreground (and in the background)."""
    straight = subprocess.run(_command(_strategy(tmp_path, LAYOUTS[name], False), tmp_path / "straight"),
                              capture_output=True, text=True, timeout=200, cwd=tmp_path)
    assert straight.returncode == 0, straight.stderr[-3000:]
    base = json.loads((tmp_path / "straight" / "summary.json").read_text())
    want = _tensors(tmp_path / "straight" / "checkpoints" / f"step-{STEPS}")
    assert any(key.startswith("optimizer.") for key in want)
    for async_save in (False, True) if name in BACKGROUND else (False,):
        run = tmp_path / f"killed_{'async' if async_save else 'sync'}"
        run.mkdir()
        killed, victim = _killed_run(_strategy(run, LAYOUTS[name], async_save), run / "out")
        assert victim, f"rank 1 was never found to kill:\n{killed.stdout[-3000:]}"
        assert killed.returncode == 0, killed.stdout[-4000:]
        assert f"failed (exitcode: -9) local_rank: 1 (pid: {victim})" in killed.stdout  # torchrun's account of it
        after = json.loads((run / "out" / "summary.json").read_text())
        k = after["first_step"]
        assert EVERY <= k < STEPS and k % EVERY == 0, k  # continued from a periodic checkpoint, not from the start
        assert f"resuming from {run / 'out' / 'checkpoints' / f'step-{k}'} (step {k})" in killed.stdout
        assert after["losses"] == base["losses"][k:], async_save  # every step after the restart, exactly
        got = _tensors(run / "out" / "checkpoints" / f"step-{STEPS}")
        assert got.keys() == want.keys()
        for key, value in want.items():
            assert torch.equal(got[key], value), (key, async_save)
