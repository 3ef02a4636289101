"""pp_configs.profiling's output: one step's events of every stage merged into a Chrome trace (chrome://tracing,
Perfetto: a row per stage, every micro-batch's forward and backward an event) and a Gantt picture of it."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Sequence
from pathlib import Path

from strategy.atomic import write_atomic

from .timers import Event

__all__ = ["write_timeline"]

_COLOURS = {"forward": "tab:blue", "backward": "tab:orange", "weight": "tab:green"}


def chrome_trace(events: Sequence[tuple[int, Event]]) -> dict:
    """(rank, event) pairs as a Chrome trace: process 0, one thread (row) per stage, times in microseconds."""
    rows = sorted({e.stage for _, e in events})
    trace = [{"name": "thread_name", "ph": "M", "pid": 0, "tid": s, "args": {"name": f"stage {s}"}} for s in rows]
    trace += [{"name": f"{e.kind[0].upper()}{e.micro_batch}", "cat": e.kind, "ph": "X", "pid": 0, "tid": e.stage,
               "ts": e.start * 1e6, "dur": (e.end - e.start) * 1e6,
               "args": {"micro_batch": e.micro_batch, "rank": rank, "kind": e.kind}} for rank, e in events]
    return {"traceEvents": trace, "displayTimeUnit": "ms"}


def write_timeline(events: Sequence[tuple[int, Event]], folder: str | os.PathLike[str], step: int) -> list[Path]:
    """pipeline_timeline.json and (with matplotlib) pipeline_timeline.png for `step`, each written beside and moved
    into place; the paths written."""
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    write_atomic(target / "pipeline_timeline.json", json.dumps({"step": step, **chrome_trace(events)}).encode())
    written = [target / "pipeline_timeline.json"]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return written
    rows = sorted({e.stage for _, e in events})
    fig, ax = plt.subplots(figsize=(10, 0.6 * len(rows) + 1.2))
    for _, e in events:
        ax.broken_barh([(e.start * 1e3, (e.end - e.start) * 1e3)], (e.stage - 0.4, 0.8), color=_COLOURS[e.kind])
        ax.text((e.start + e.end) / 2 * 1e3, e.stage, f"{e.kind[0].upper()}{e.micro_batch}", ha="center",
                va="center", fontsize=7, color="white")
    ax.set_yticks(rows, [f"stage {s}" for s in rows])
    ax.invert_yaxis()
    ax.set(xlabel="ms since the step's schedule began", title=f"pipeline, step {step}")
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=110)
    plt.close(fig)
    write_atomic(target / "pipeline_timeline.png", png.getvalue())
    return [*written, target / "pipeline_timeline.png"]
