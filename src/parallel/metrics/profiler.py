"""`Profiler`: a torch.profiler trace of a few steps per rank (Chrome/Perfetto JSON), the examples' --trace.

torch.profiler's kineto prints a line at every start and stop ("USDT: ... profiler_start") on file descriptor 2, which
no log level silences: those go to profiler_rankR.log beside the trace, off a run's progress bar.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

__all__ = ["Profiler"]


class Profiler:
    """Profile steps `first`..`first + active - 1` (after one step of warm-up) into `trace_dir`/trace_rankR.json.

    Call `step()` after every step and `stop()` at the end.
    """

    def __init__(self, trace_dir: str | os.PathLike[str], *, first: int = 2, active: int = 3) -> None:
        from torch.profiler import ProfilerActivity, profile, schedule

        folder = Path(trace_dir)
        folder.mkdir(parents=True, exist_ok=True)
        rank = dist.get_rank() if dist.is_initialized() else 0
        self.log = folder / f"profiler_rank{rank}.log"
        self.trace = folder / f"trace_rank{rank}.json"

        def save(prof: Any) -> None:
            prof.export_chrome_trace(str(self.trace))

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
        self.prof = profile(activities=activities, schedule=schedule(wait=max(0, first - 2), warmup=1, active=active,
                                                                     repeat=1), on_trace_ready=save)
        with _stderr_to(self.log):
            self.prof.start()

    def step(self) -> None:
        with _stderr_to(self.log):
            self.prof.step()

    def stop(self) -> None:
        with _stderr_to(self.log):
            self.prof.stop()


@contextlib.contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """File descriptor 2 appended to `path` for the block (what C++ code prints there, past sys.stderr)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "ab") as log:
            os.dup2(log.fileno(), 2)
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
