"""Running one trial (or the device probe) under the launcher: a process tree of its own, a time limit, and a result
classified ok / oom / timeout / error / cut.

A trial runs in a new session, its output in a log file. Past its time limit the whole tree is ended: every process
descending from the launcher, found before any is signalled (torchrun's workers run in sessions of their own, so a
process group would miss them), SIGTERM, then SIGKILL after `GRACE` seconds. No other process is signalled. If the
tuner itself dies, the kernel sends the launcher SIGTERM (Linux's parent-death signal), which torchrun passes on to its
workers.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Outcome", "run", "end_tree", "default_launcher"]

GRACE = 3.0  # seconds between SIGTERM and SIGKILL
_OOM_TEXT = ("OutOfMemoryError", "CUDA out of memory", "out of memory")


@dataclass
class Outcome:
    """A finished trial: its status and what it measured (`result`: trial.json's fields, or what was read from the
    metrics files of a user's script), the launcher's exit status and the tail of its log."""

    status: str
    result: dict[str, Any] = field(default_factory=dict)
    returncode: int | None = None
    wall_seconds: float = 0.0
    error: str = ""
    killed: list[int] = field(default_factory=list)  # the pids ended at the time limit


def default_launcher(world_size: int) -> list[str]:
    """torchrun on this machine, one rank per device: `python -m torch.distributed.run --standalone ...`."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world_size}"]


def _parent_death_signal() -> None:  # pragma: no cover - runs in the child, before exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def run(command: Sequence[str], *, cwd: Path, log: Path, timeout: float, env: Mapping[str, str] | None = None) -> Outcome:
    """Run `command` in `cwd` (its output into `log`) for at most `timeout` seconds; classify what it left in `cwd`."""
    cwd.mkdir(parents=True, exist_ok=True)
    for stale in [cwd / "trial.json", *cwd.glob("oom_rank*.json"), *cwd.rglob("metrics_rank*.jsonl")]:
        stale.unlink(missing_ok=True)  # (a retried trial: only this run's files count; the Meter appends)
    start = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(list(command), cwd=cwd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=dict(env) if env is not None else None, start_new_session=True,
                                preexec_fn=_parent_death_signal if sys.platform.startswith("linux") else None)
        killed: list[int] = []
        code: int | None
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            killed = end_tree(proc.pid)
            proc.wait()
            code = None  # (its exit status is the signal's)
        except BaseException:  # the tuner interrupted (Ctrl-C, an error in a caller's thread): the trial goes too
            end_tree(proc.pid)
            raise
    wall = time.monotonic() - start
    outcome = classify(cwd, log, code)
    outcome.wall_seconds, outcome.killed = wall, killed
    if code is None and outcome.status not in ("ok", "cut"):  # (a result written before it hung in shutdown counts)
        outcome.status, outcome.error = "timeout", f"no result within {timeout:.0f} s: ended {len(killed)} processes"
    return outcome


def end_tree(pid: int) -> list[int]:
    """End `pid` and every process descending from it: SIGTERM, then SIGKILL to those left after `GRACE` seconds.
    Returns the pids it signalled."""
    import psutil

    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []
    for p in tree:
        try:
            p.send_signal(signal.SIGTERM)
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(tree, timeout=GRACE)
    try:  # listed again: what started during the grace period (a worker forked late) goes too
        late = [p for p in root.children(recursive=True) if p not in tree]
    except psutil.NoSuchProcess:
        late = []
    for p in [*alive, *late]:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs([*alive, *late], timeout=GRACE)
    return [p.pid for p in [*tree, *late]]


def classify(cwd: Path, log: Path, code: int | None) -> Outcome:
    """The outcome from what the trial left: trial.json (the built-in runner), an oom_rankR.json, the metrics files of
    a user's script (metrics_rank0.jsonl through parallel.Meter), else the exit status and the log."""
    tail = _tail(log)
    written = cwd / "trial.json"
    if any(cwd.glob("oom_rank*.json")) or (code not in (0, None) and any(t in tail for t in _OOM_TEXT)):
        return Outcome("oom", returncode=code, error=_last_line(tail, _OOM_TEXT))
    if written.exists():
        result = json.loads(written.read_text())
        status = result.get("status", "error")
        if status == "ok" and code not in (0, None):
            status = "error"
        return Outcome(status, result, code, error=result.get("error", "") or (tail if status == "error" else ""))
    metrics = sorted(cwd.rglob("metrics_rank0.jsonl"))
    if code == 0 and metrics:
        return Outcome("ok", _from_metrics(metrics[0]), code)
    if code is None:
        return Outcome("timeout", returncode=code)
    why = f"exit status {code}" if code >= 0 else f"killed by {signal.Signals(-code).name}"
    return Outcome("error", returncode=code, error=f"{why}: {tail[-1500:]}")


def _from_metrics(path: Path, warmup: int = 2) -> dict[str, Any]:
    """A user's script: the step times and peak memory its Meter logged (every log after the first `warmup`)."""
    import statistics

    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut by a kill
            continue
    timed = records[warmup:] or records
    steps = [r["step_seconds"]["max"] for r in timed]
    peaks = [max(r["per_rank"]["memory_peak_bytes"]) for r in timed]
    return {"status": "ok", "step_seconds": statistics.median(steps), "steps": steps,
            "memory": {"peak_bytes": max(peaks) if peaks else None}}


def _tail(log: Path, size: int = 8000) -> str:
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - size))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _last_line(text: str, needles: Sequence[str]) -> str:
    lines = [line.strip() for line in text.splitlines() if any(n in line for n in needles)]
    return lines[-1][:300] if lines else "out of memory"
