"""Running a trial: past its time limit its whole process tree is ended (children in sessions of their own too, as
torchrun's workers are) and nothing else; what a trial leaves is classified ok / oom / cut / error / timeout."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from strategy.tuning import launch

# A launcher with a worker in a session of its own (as torchrun starts them), both sleeping: a hung trial.
HUNG = textwrap.dedent("""
    import subprocess, sys, time
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    open("pids", "w").write(f"{worker.pid}\\n")
    time.sleep(600)
""")


@pytest.mark.timeout(60)
def test_a_hung_trial_is_ended_within_its_limit_with_every_process_of_it_and_nothing_else(tmp_path):
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    try:
        start = time.monotonic()
        outcome = launch.run([sys.executable, "-c", HUNG], cwd=tmp_path, log=tmp_path / "log.txt", timeout=3)
        took = time.monotonic() - start
        worker = int((tmp_path / "pids").read_text())
        assert outcome.status == "timeout" and outcome.error.startswith("no result within 3 s: ended 2 processes")
        assert 3 <= took <= 3 + 10
        assert worker in outcome.killed and len(outcome.killed) == 2
        assert not psutil.pid_exists(worker) or psutil.Process(worker).status() == psutil.STATUS_ZOMBIE
        assert bystander.poll() is None  # not signalled
    finally:
        bystander.kill()
        bystander.wait()


def test_what_a_trial_leaves_is_classified(tmp_path):
    ok = tmp_path / "ok"
    ok.mkdir()
    (ok / "trial.json").write_text(json.dumps({"status": "ok", "step_seconds": 0.2}))
    assert launch.classify(ok, ok / "log.txt", 0).status == "ok"
    assert launch.classify(ok, ok / "log.txt", 1).status == "error"  # a result, but a rank failed after it
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "trial.json").write_text(json.dumps({"status": "cut", "step_seconds": 0.9}))
    assert launch.classify(cut, cut / "log.txt", 0).result["step_seconds"] == 0.9
    oom = tmp_path / "oom"
    oom.mkdir()
    (oom / "oom_rank1.json").write_text("{}")
    assert launch.classify(oom, oom / "log.txt", 1).status == "oom"
    logged = tmp_path / "logged"
    logged.mkdir()
    (logged / "log.txt").write_text("Traceback...\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB\n")
    outcome = launch.classify(logged, logged / "log.txt", 1)
    assert outcome.status == "oom" and outcome.error.startswith("torch.OutOfMemoryError: CUDA out of memory")
    failed = tmp_path / "failed"
    failed.mkdir()
    (failed / "log.txt").write_text("ValueError: no such model\n")
    outcome = launch.classify(failed, failed / "log.txt", 1)
    assert outcome.status == "error" and outcome.error == "exit status 1: ValueError: no such model\n"
    assert launch.classify(failed, failed / "log.txt", -9).error.startswith("killed by SIGKILL")


def test_a_users_script_is_read_from_its_meters_records(tmp_path):
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    records = [{"step_seconds": {"max": s}, "per_rank": {"memory_peak_bytes": [m, m + 1]}}
               for s, m in [(1.0, 10), (0.5, 10), (0.2, 30), (0.3, 20), (0.25, 20)]]
    (metrics / "metrics_rank0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    outcome = launch.classify(tmp_path, tmp_path / "log.txt", 0)
    assert outcome.status == "ok"  # the first two logs are the warm-up
    assert outcome.result["steps"] == [0.2, 0.3, 0.25] and outcome.result["step_seconds"] == 0.25
    assert outcome.result["memory"]["peak_bytes"] == 31
