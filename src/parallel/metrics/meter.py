"""`parallel.Meter`: what a run's steps cost, per rank, logged at the strategy's interval (metrics_configs).

Every step is timed (and each named phase in it, and the time spent in this project's collectives); at each log step
the ranks exchange one fixed-size vector (one all_gather over the world), rank 0 prints a line, and every rank appends
the same record, with its rank, to its own metrics_rankR.jsonl. Nothing else is communicated; a run without a Meter
times nothing.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ..topology import HybridGroup
from ..topology.guard import collective_seconds, time_collectives
from .flops import flops_per_token as count_flops
from .memory import peak_memory, reset_peak_memory
from .peak import device_peak_flops

__all__ = ["Meter", "PHASES"]

PHASES = ("data", "forward", "backward", "optimizer")
_NOISE = 0.010  # seconds: a straggler is slower than the median by more than this too (timer noise on tiny steps)
_OPTIMIZER_PARTS = ("reduce", "clip", "update", "sync")
_PIPELINE_PARTS = ("forward", "backward", "weight", "wait")  # pp_configs.enable_timer: this rank's stages' sums
# The vector each rank contributes at a log, summed over the window's steps (memory: the window's peak): steps, step
# seconds, wait seconds, peak used, peak held; then each phase's, optimizer part's and pipeline part's seconds; then
# the losses' sum and count, and whether the rank holds the last pipeline stage.
_STEPS, _SECONDS, _WAIT, _USED, _HELD, _PHASES = range(6)  # the phases from _PHASES on
_LOSS_SUM, _LOSSES, _LAST_STAGE = -3, -2, -1


class Meter:
    """Step time, phases, tokens/s, TFLOP/s and MFU, memory and stragglers of a run, per rank.

    Args:
        hcg: the HybridGroup (`parallel.init`); its strategy's metrics_configs gives the log interval, the output
            directory, TensorBoard, the peak FLOP/s and the straggler threshold.
        model: this rank's model (its share under mp, pp, sharding, ep): the FLOPs are counted from it for the whole
            model (`flops.flops_per_token`), one all-reduce over pp at creation.
        tokens_per_step: tokens the whole run takes per step (global batch × sequence length).
        seq_len: the sequence length, for attention's FLOPs.
        out: the run's output directory (metrics_configs.dir is relative to it); None: no files.
        phases: the names `phase()` takes; the same on every rank (they size the vector the ranks exchange).
        attention: (layers, heads, head_dim) for attention's FLOPs, when the model is no Hugging Face model.
        flops_per_token: the count to use instead of counting the model.
        optimizer: a HybridParallelOptimizer whose strategy sets hybrid_configs.enable_optimizer_timer: its step's
            parts are logged too.
        prediction: what the plan predicted, logged beside the measurement: "step_seconds", "memory_bytes".
        sinks: callables given each record on rank 0 (a W&B or accelerate tracker's log, say).
        clock: the time source (seconds); injectable for tests.
        echo: prints rank 0's line.
        interval: log every this many steps instead of metrics_configs.log_interval (a trial of `strategy tune`
            logs every step: its stopping rule reads each step's slowest rank).

    Example::

        meter = parallel.Meter(hcg, model, tokens_per_step=batch * seq, seq_len=seq, out="out")
        for k in range(1, steps + 1):
            with meter.step(k):
                with meter.phase("forward"):
                    loss = model(x).loss
                with meter.phase("backward"):
                    loss.backward()
                with meter.phase("optimizer"):
                    opt.step()
                meter.loss(loss.item())
        meter.close()
    """

    def __init__(self, hcg: HybridGroup, model: nn.Module, *, tokens_per_step: int, seq_len: int,
                 out: str | os.PathLike[str] | None = None, phases: Sequence[str] = PHASES,
                 attention: tuple[int, int, int] | None = None, flops_per_token: float | None = None,
                 optimizer: Any = None, prediction: Mapping[str, float] | None = None,
                 sinks: Sequence[Callable[[dict[str, Any]], None]] = (), clock: Callable[[], float] = time.perf_counter,
                 echo: Callable[[str], None] = print, interval: int | None = None) -> None:
        if len(set(phases)) != len(phases):
            raise ValueError(f"phases {list(phases)} name one twice")
        settings = hcg.resolved.metrics
        self.hcg, self.settings, self.phases = hcg, settings, tuple(phases)
        self.tokens_per_step, self.clock, self.echo, self.sinks = tokens_per_step, clock, echo, tuple(sinks)
        self.optimizer, self.prediction = optimizer, dict(prediction or {})
        first = next(model.parameters(), None)
        self.device = first.device if first is not None else torch.device("cpu")
        self.flops_per_token = (float(flops_per_token) if flops_per_token is not None
                                else count_flops(model, hcg, seq_len=seq_len, attention=attention))
        amp = hcg.resolved.amp
        self.peak_flops = settings.peak_flops or device_peak_flops(self.device, amp.dtype if amp.enabled else None)
        self.interval = settings.log_interval if interval is None else interval
        if self.interval < 0:
            raise ValueError(f"interval must be >= 0 (0: never log), got {self.interval}")
        self.last: dict[str, Any] | None = None  # the last log's record
        # A PipelineModel whose strategy times its stages (pp_configs.enable_timer or profiling).
        self._stages = getattr(model, "timer", None) if hasattr(model, "stage_ids") else None
        self._profile = self._stages is not None and hcg.resolved.pipeline.profiling
        last = hcg.resolved.pipeline.pp_rank_of(hcg.resolved.pipeline.num_stages - 1) if hcg.pp_size > 1 else 0
        self._holds_last_stage = float(hcg.pp_rank == last)
        self._folder: Path | None = None
        self._optimizer_at = _PHASES + len(self.phases)  # where the optimizer's parts start in the vector, then the pipeline's
        self._pipeline_at = self._optimizer_at + len(_OPTIMIZER_PARTS)
        self._window = torch.zeros(self._pipeline_at + len(_PIPELINE_PARTS) + 3, dtype=torch.float64)
        self._phase_open: str | None = None
        self._jsonl: Path | None = None
        self._tensorboard: Any = None
        if out is not None:
            folder = self._folder = Path(out) / settings.dir
            folder.mkdir(parents=True, exist_ok=True)
            self._jsonl = folder / f"metrics_rank{hcg.rank}.jsonl"
            if settings.tensorboard and hcg.rank == 0:
                self._tensorboard = _tensorboard(folder / "tensorboard")
        reset_peak_memory(self.device)
        if self.device.type == "cuda" and self._folder is not None:  # what a snapshot on OOM shows: each allocation
            torch.cuda.memory._record_memory_history(max_entries=100_000)
        time_collectives(True)
        self._closed = False

    def loss(self, value: float) -> None:
        """This step's loss as this rank knows it; the log shows the mean since the last log of a rank that holds the
        model's last pipeline stage (where the loss is computed; any rank without a pipeline)."""
        self._window[_LOSS_SUM] += float(value)
        self._window[_LOSSES] += 1

    @contextmanager
    def step(self, k: int) -> Iterator[None]:
        """Time step `k` (numbered as the run prints it); after it, log when k is a multiple of the interval."""
        start, waited = self.clock(), collective_seconds()
        try:
            yield
        except torch.OutOfMemoryError:
            self._snapshot(k)
            raise
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # the step's kernels done: wall time is the step's
        w = self._window
        w[_STEPS] += 1
        w[_SECONDS] += self.clock() - start
        w[_WAIT] += collective_seconds() - waited
        timings = getattr(self.optimizer, "timings", None)
        if timings:
            for i, part in enumerate(_OPTIMIZER_PARTS):
                w[self._optimizer_at + i] += timings.get(part, 0.0)
        if self._stages is not None and self._stages.totals:
            for i, part in enumerate(_PIPELINE_PARTS):
                w[self._pipeline_at + i] += self._stages.totals[part]
        if self.interval and k % self.interval == 0:
            self._log(k)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time a named part of the step (one of `phases`; phases do not nest)."""
        try:
            index = self.phases.index(name)
        except ValueError:
            raise ValueError(f"phase {name!r} is not one of this meter's phases {list(self.phases)}: name it when "
                             "creating the Meter (phases=...), the same on every rank") from None
        if self._phase_open is not None:
            raise RuntimeError(f"phase {name!r} opened inside phase {self._phase_open!r}: phases do not nest")
        self._phase_open = name
        start = self.clock()
        try:
            yield
        finally:
            self._window[_PHASES + index] += self.clock() - start
            self._phase_open = None

    def _log(self, k: int) -> None:
        used, held = peak_memory(self.device)
        reset_peak_memory(self.device)
        self._window[_USED], self._window[_HELD] = used, held
        self._window[_LAST_STAGE] = self._holds_last_stage
        rows = _gather(self._window)
        self._window.zero_()
        record = self._record(k, rows)
        if self._profile:
            self._timeline(k, record)
        self.last = record
        if self._jsonl is not None:
            _append(self._jsonl, json.dumps({"rank": self.hcg.rank, **record}) + "\n")
        if self.hcg.rank == 0:
            self.echo(line(record))
            for sink in self.sinks:
                sink(record)
            if self._tensorboard is not None:
                _to_tensorboard(self._tensorboard, record)

    def _record(self, k: int, rows: torch.Tensor) -> dict[str, Any]:
        n = rows[:, _STEPS].clamp(min=1)
        step = (rows[:, _SECONDS] / n).tolist()
        wait = (rows[:, _WAIT] / n).tolist()
        busy = [s - w for s, w in zip(step, wait)]
        slowest = max(step)
        world = len(step)
        tokens = self.tokens_per_step / slowest / world if slowest > 0 else 0.0  # per second, per device
        flops = self.flops_per_token * tokens
        phases = {name: (rows[:, _PHASES + i] / n).tolist() for i, name in enumerate(self.phases)}
        # The loss of the first rank that holds the last stage and was told one (None when no rank was).
        told = [r for r in range(world) if rows[r, _LAST_STAGE] > 0 and rows[r, _LOSSES] > 0]
        loss = float(rows[told[0], _LOSS_SUM] / rows[told[0], _LOSSES]) if told else None
        record: dict[str, Any] = {
            "step": k, "steps": int(rows[0, _STEPS]), "loss": loss,
            "step_seconds": {"min": min(step), "min_rank": step.index(min(step)), "max": slowest,
                             "max_rank": step.index(slowest)},
            "tokens_per_second_per_device": tokens,
            "tflops_per_device": flops / 1e12, "peak_flops": self.peak_flops,
            "mfu": flops / self.peak_flops if self.peak_flops else None,
            "straggler": _straggler(busy, self.settings.straggler_threshold),
            "per_rank": {"step_seconds": step, "busy_seconds": busy, "wait_seconds": wait,
                         "memory_peak_bytes": rows[:, _USED].tolist(), "memory_reserved_bytes": rows[:, _HELD].tolist(),
                         "phases": phases},
        }
        if getattr(self.optimizer, "timings", None) is not None:
            record["per_rank"]["optimizer"] = {part: (rows[:, self._optimizer_at + i] / n).tolist()
                                               for i, part in enumerate(_OPTIMIZER_PARTS)}
        if self._stages is not None:
            record["per_rank"]["pipeline"] = {part: (rows[:, self._pipeline_at + i] / n).tolist()
                                              for i, part in enumerate(_PIPELINE_PARTS)}
        if self.prediction:
            measured = {"step_seconds": slowest, "memory_bytes": float(rows[:, _USED].max())}
            record["prediction"] = {key: {"predicted": value, "measured": measured.get(key),
                                          "ratio": measured[key] / value if key in measured and value else None}
                                    for key, value in self.prediction.items()}
        return record

    def _snapshot(self, k: int) -> None:
        """Out of memory in step k: on CUDA the allocator's snapshot (memory_snapshot_rankR.pickle, for
        https://pytorch.org/memory_viz), elsewhere the figures the meter has (memory_snapshot_rankR.json)."""
        if self._folder is None:
            return
        stem = self._folder / f"memory_snapshot_rank{self.hcg.rank}"
        if self.device.type == "cuda":
            torch.cuda.memory._dump_snapshot(str(stem.with_suffix(".pickle")))
            return
        used, held = peak_memory(self.device)
        stem.with_suffix(".json").write_text(json.dumps({"step": k, "rank": self.hcg.rank, "peak_bytes": used,
                                                         "held_bytes": held}) + "\n")

    def _timeline(self, k: int, record: dict[str, Any]) -> None:
        """pp_configs.profiling: every rank's events of step k merged into one timeline (an all_gather of objects,
        made only when profiling is on), written by rank 0."""
        h = self.hcg  # one replica's stages: the ranks of the first data, mp, sep and cp position
        first = h.data_rank == 0 and h.mp_rank == 0 and h.sep_rank == 0 and h.cp_rank == 0
        events = [(h.rank, e) for e in self._stages.events] if first else []  # type: ignore[union-attr]
        everyone: list[Any] = [None] * dist.get_world_size() if dist.is_initialized() else [events]
        if dist.is_initialized():
            dist.all_gather_object(everyone, events)
        if self.hcg.rank == 0 and self._folder is not None:
            from ..pipeline.timeline import write_timeline

            merged = [pair for part in everyone for pair in part]
            record["pipeline_timeline"] = [str(p) for p in write_timeline(merged, self._folder, k)]

    def close(self) -> None:
        """Stop counting collective time (and close TensorBoard's writer)."""
        if not self._closed:
            time_collectives(False)
            if self.device.type == "cuda" and self._folder is not None:
                torch.cuda.memory._record_memory_history(enabled=None)
            if self._tensorboard is not None:
                self._tensorboard.close()
            self._closed = True


def _gather(vector: torch.Tensor) -> torch.Tensor:
    """Every rank's vector, one row per rank (the only collective a log makes)."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return vector.unsqueeze(0).clone()
    rows = [torch.empty_like(vector) for _ in range(dist.get_world_size())]
    dist.all_gather(rows, vector)
    return torch.stack(rows)


def _straggler(busy: list[float], threshold: float) -> int | None:
    """The rank busy longest, when it is above the median by more than `threshold` of it (and timer noise)."""
    if len(busy) < 2:
        return None
    median = statistics.median(busy)
    worst = max(range(len(busy)), key=busy.__getitem__)
    excess = busy[worst] - median
    return worst if excess > threshold * median and excess > _NOISE else None


def line(record: dict[str, Any]) -> str:
    """Rank 0's line for a record."""
    s = record["step_seconds"]
    per = record["per_rank"]
    mem = per["memory_peak_bytes"]
    top = max(range(len(mem)), key=mem.__getitem__)
    wait = per["wait_seconds"]
    waits = max(range(len(wait)), key=wait.__getitem__)
    mfu = f", MFU {record['mfu']:.1%} of {record['peak_flops'] / 1e12:,.0f} TFLOP/s" if record["mfu"] is not None else ""
    straggler = f", straggler: rank {record['straggler']}" if record["straggler"] is not None else ""
    loss = f"loss {record['loss']:.4f}, " if record.get("loss") is not None else ""
    return (f"metrics step {record['step']}: {loss}{s['max']:.3f} s/step (min {s['min']:.3f} rank {s['min_rank']}, max "
            f"rank {s['max_rank']}), {record['tokens_per_second_per_device']:,.0f} tok/s/device, "
            f"{record['tflops_per_device']:.3g} TFLOP/s/device{mfu}, wait {wait[waits]:.3f} s (rank {waits}), peak "
            f"memory {mem[top] / 2**30:.2f} GiB (rank {top}){straggler}")


def _append(path: Path, text: str) -> None:
    """One record appended in one write (an O_APPEND write of a line is never interleaved with another)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _tensorboard(folder: Path) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as e:
        raise ImportError(f"metrics_configs.tensorboard is on, but TensorBoard is not installed ({e}): pip install "
                          "tensorboard, or set tensorboard: false") from None
    return SummaryWriter(log_dir=str(folder))


def _to_tensorboard(writer: Any, record: dict[str, Any]) -> None:
    k = record["step"]
    writer.add_scalar("step_seconds/max", record["step_seconds"]["max"], k)
    writer.add_scalar("step_seconds/min", record["step_seconds"]["min"], k)
    writer.add_scalar("tokens_per_second", record["tokens_per_second_per_device"], k)
    writer.add_scalar("tflops", record["tflops_per_device"], k)
    if record["mfu"] is not None:
        writer.add_scalar("mfu", record["mfu"], k)
    for rank, value in enumerate(record["per_rank"]["memory_peak_bytes"]):
        writer.add_scalar(f"memory_peak_bytes/rank{rank}", value, k)
    writer.flush()
