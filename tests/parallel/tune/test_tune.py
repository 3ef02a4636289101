"""`strategy tune` end to end on this machine (torchrun, one rank, a tiny Llama): trials that run out of memory or hang
are recorded and the tune goes on (a hung one ended within its limit, every process of it and nothing else); the
history follows its schema; the best strategy validates strictly; a tune killed with SIGKILL goes on from its history
without running a finished trial again. bench/tune.py measures the choices against the ground truth at world 2."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time

import jsonschema
import psutil
import pytest

import strategy
from strategy.tuning.history import SCHEMA_PATH
from strategy.tuning.tuner import SPEED_WEIGHT, corrected

TINY = {"model_type": "llama", "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 96, "max_position_embeddings": 64, "tie_word_embeddings": False}
ARGS = dict(world_size=1, seq_len=64, global_batch=4, max_steps=4)


def tiny_model(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY))
    return path


def records(out):
    return [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]


def trial_processes(folder) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if any(str(folder) in part for part in p.info["cmdline"] or ()):
            found.append(p)
    return found


@pytest.mark.timeout(400)
def test_an_oom_a_hang_and_a_slow_trial_are_recorded_and_the_tune_goes_on_to_a_strict_best_and_a_calibration(tmp_path):
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    lines: list[str] = []
    try:
        # (top=6: all six layouts of one rank on the shortlist, so five trials run whatever the fit predicts)
        result = strategy.tune(tiny_model(tmp_path), out=tmp_path / "tune", max_trials=5, top=6, trial_timeout=30,
                               env=os.environ | {"STRATEGY_TUNE_INJECT": "oom@2,hang@3,slow@4"}, progress=lines.append,
                               bar=False, **ARGS)
        assert bystander.poll() is None  # nothing outside the trials was signalled
    finally:
        bystander.kill()
        bystander.wait()
    statuses = [t.status for t in result.trials]
    assert statuses[:4] == ["ok", "oom", "timeout", "cut"], [t.error for t in result.trials]
    assert statuses[4] in ("ok", "cut")  # (a layout of a tiny model can be twice as slow as the first for real)
    assert "injected by STRATEGY_TUNE_INJECT (trial 2)" in result.trials[1].error
    hung = result.trials[2]
    assert 30 <= hung.wall_seconds <= 30 + 10 and hung.error.startswith("no result within 30 s: ended")
    assert not trial_processes(tmp_path / "tune" / "trials" / hung.key[:12])  # none of its processes survives
    # one line per trial, with its status and figures
    per_trial = [line for line in lines if line.startswith("[")]
    assert [line.split("]")[1].split()[0] for line in per_trial] == statuses and " s/step (" in per_trial[0]
    assert "plan " in per_trial[0] and "calibrated " in per_trial[0]
    measured = [t for t in result.trials if t.status in ("ok", "cut")]
    for t in result.trials:
        if t.status == "ok":  # measured memory (model states + saved activations) against estimate_memory
            assert abs(t.memory_bytes - t.estimate_bytes) <= 0.1 * t.memory_bytes
    schema = json.loads(SCHEMA_PATH.read_text())
    history = records(tmp_path / "tune")
    for record in history:
        jsonschema.validate(record, schema)
    assert [r["event"] for r in history] == ["start", "end"] * 5
    cut = result.trials[3]  # two timed steps of a second each, then ended: over twice the best
    assert len(history[7]["result"]["steps"]) == 2 and cut.step_seconds > 2 * result.trials[0].step_seconds
    # each measured step time is compared at the probe's speed: as measured × (the probe's reference workload seconds
    # / the trial's) ** SPEED_WEIGHT
    probe = json.loads((tmp_path / "tune" / "probe" / "probe.json").read_text())
    first = history[1]["result"]
    assert probe["reference_seconds"] > 0 and first["reference_seconds"] > 0
    assert result.trials[0].step_seconds == pytest.approx(
        first["step_seconds"] * (probe["reference_seconds"] / first["reference_seconds"]) ** SPEED_WEIGHT)
    best = tmp_path / "tune" / "best.prototxt"
    assert result.best is min((t for t in measured if t.status == "ok"), key=lambda t: t.step_seconds)
    strategy.resolve(strategy.load(best), world_size=1)  # strict
    calibration = strategy.load_calibration(tmp_path / "tune" / "calibration.json")
    assert calibration.fitted == len(measured) and calibration.context["world_size"] == 1  # ok and cut trials
    assert "| 3 | " in (tmp_path / "tune" / "tune.md").read_text()


@pytest.mark.timeout(400)
def test_a_tune_killed_with_sigkill_goes_on_from_its_history_without_rerunning_a_finished_trial(tmp_path):
    out = tmp_path / "tune"
    command = [sys.executable, "-m", "strategy", "tune", "--model", str(tiny_model(tmp_path)), "--world-size", "1",
               "--seq-len", "64", "--global-batch", "4", "--max-steps", "4", "--max-trials", "6", "--top", "6",
               "--out", str(out)]  # (all six layouts of one rank on the shortlist: the budget is six trials)
    tuner = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and tuner.poll() is None:
        history = records(out) if (out / "history.jsonl").exists() else []
        if sum(r["event"] == "end" for r in history) >= 5 and history[-1]["event"] == "start":
            break  # five trials finished, the sixth running
        time.sleep(0.2)
    tuner.send_signal(signal.SIGKILL)
    tuner.wait()
    before = records(out)
    ended = {r["key"] for r in before if r["event"] == "end"}
    running = before[-1]["key"]
    assert len(ended) == 5 and before[-1]["event"] == "start"
    ended_by = time.monotonic() + 10  # the kernel ends the killed tuner's trial (its launcher's parent-death signal)
    while trial_processes(out / "trials" / running[:12]) and time.monotonic() < ended_by:
        time.sleep(0.2)
    assert not trial_processes(out / "trials" / running[:12])

    rerun = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    after = records(out)[len(before):]
    firsts = [r["key"] for r in after if r["event"] == "start" and "repeat" not in r]  # (not a close contender again)
    assert not set(firsts) & ended  # no finished trial runs again
    assert firsts.count(running) == 1  # the interrupted one, once
    assert rerun.stdout.count("(from the history)") == 5
    runs: dict[str, list[float]] = {}  # each layout's ok runs (a close contender measured again has several), at
    reference = json.loads((out / "probe" / "probe.json").read_text())["reference_seconds"]  # the rerun probe's speed
    for r in records(out):
        if r["event"] == "end" and r["result"]["status"] == "ok":
            runs.setdefault(r["key"], []).append(corrected(r["result"], reference))
    fastest = min(statistics.median(v) for v in runs.values())
    best = (out / "best.prototxt").read_text()
    assert f"{fastest:.4f} s a step measured" in best.splitlines()[0]  # the best of both runs together
