"""pp_configs.enable_timer and profiling: each micro-batch's forward, backward and weight-gradient time on this rank's
stages, taken around torch's own PipelineStage calls, and the rest of the step's schedule (the bubble, the sends and
receives) as its wait. parallel.Meter logs the sums per rank; with profiling it merges the events of every rank into
one timeline at its logs (`timeline.py`). Off, the stages are not wrapped and nothing is timed."""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import torch

__all__ = ["Event", "StageTimer"]

KINDS = ("forward", "backward", "weight")


class Event(NamedTuple):
    stage: int
    kind: str  # "forward", "backward" (input gradient, or all of it) or "weight" (a split schedule's weight gradient)
    micro_batch: int
    start: float  # seconds since the step's schedule began on this rank
    end: float


class StageTimer:
    """The events of this rank's stages in the last training step, and their sums with the step's wait."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device if device.type == "cuda" else None
        self.events: list[Event] = []
        self.totals: dict[str, float] = {}  # the last step's forward, backward, weight, wait and schedule seconds
        self._begin = 0.0
        self._on = False

    def _now(self) -> float:
        if self.cuda is not None:
            torch.cuda.synchronize(self.cuda)  # the kernels launched so far done: their time is the phase's
        return time.perf_counter()

    def wrap(self, stage: Any) -> None:
        """Time `stage`'s forward_one_chunk, backward_one_chunk and backward_weight_one_chunk (this instance's)."""
        for method, kind in zip(("forward_one_chunk", "backward_one_chunk", "backward_weight_one_chunk"), KINDS):
            setattr(stage, method, self._timed(getattr(stage, method), stage.stage_index, kind))

    def _timed(self, call: Any, stage: int, kind: str) -> Any:
        def timed(chunk: int, *args: Any, **kwargs: Any) -> Any:
            if not self._on:  # evaluation, or a schedule run outside a timed step
                return call(chunk, *args, **kwargs)
            start = self._now()
            try:
                return call(chunk, *args, **kwargs)
            finally:
                self.events.append(Event(stage, kind, chunk, start - self._begin, self._now() - self._begin))
        return timed

    def begin(self) -> None:
        self.events = []
        self._on = True
        self._begin = self._now()

    def end(self) -> None:
        schedule = self._now() - self._begin
        self._on = False
        sums = {kind: sum(e.end - e.start for e in self.events if e.kind == kind) for kind in KINDS}
        self.totals = {**sums, "wait": max(0.0, schedule - sum(sums.values())), "schedule": schedule}
