"""Shared benchmark plumbing: spawn N ranks, time variants interleaved, print a table, save JSON.

Every comparison runs in one process group, variants interleaved round by round (so machine drift hits
all alike), and reports medians. CPU runs use gloo with one thread per rank; `--device cuda` uses NCCL
and CUDA events.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import socket
import statistics
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

RESULTS = Path(__file__).resolve().parent / "results"


def parse_args(description: str, **extra: Any) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--rounds", type=int, default=15, help="interleaved rounds (the median is reported)")
    p.add_argument("--json", type=Path, help="where to write the results (default bench/results/NAME[-cuda].json)")
    for flag, kwargs in extra.items():
        p.add_argument(flag, **kwargs)
    return p.parse_args()


def machine(device: str) -> str:
    if device == "cuda":
        return f"{torch.cuda.get_device_name()} x{torch.cuda.device_count()}, torch {torch.__version__}"
    return f"{os.cpu_count()} CPU cores ({platform.machine()}), torch {torch.__version__}, gloo, 1 thread per rank"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank: int, world: int, port: int, device: str, fn: Callable, args: tuple, queue: Any) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    if device == "cuda":
        torch.cuda.set_device(rank)
    dist.init_process_group("nccl" if device == "cuda" else "gloo", timeout=datetime.timedelta(seconds=300))
    try:
        result = fn(rank, world, device, *args)
        if rank == 0:
            queue.put(("ok", result))
    except BaseException:  # noqa: BLE001
        queue.put(("error", f"rank {rank}:\n{traceback.format_exc()}"))
    finally:
        import parallel

        parallel.destroy()
        dist.destroy_process_group()


def run_ranks(world: int, device: str, fn: Callable, *args: Any) -> Any:
    """fn(rank, world, device, *args) on `world` spawned ranks; returns rank 0's result."""
    # torch warns at exit about DTensor's functional collectives it cannot see waited; not our concern here.
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_entry, args=(r, world, port, device, fn, args, queue)) for r in range(world)]
    for p in procs:
        p.start()
    status, payload = queue.get(timeout=1800)
    for p in procs:
        p.join(timeout=60)
    if status != "ok":
        raise RuntimeError(payload)
    return payload


class Setup(NamedTuple):
    hcg: Any  # parallel.HybridGroup
    dtype: torch.dtype
    device: torch.device
    timer: "Timer"


def setup(rank: int, world: int, device: str) -> Setup:
    """parallel.init with mp_degree = world, and the dtype/device/timer of this run (bf16 on GPUs)."""
    import parallel
    import strategy

    s = strategy.DistributedStrategy()
    s.hybrid_configs.mp_degree = world
    hcg = parallel.init(s)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    dev = torch.device(device, rank) if device == "cuda" else torch.device("cpu")
    return Setup(hcg, dtype, dev, Timer(device))


class Timer:
    """Times a callable on CPU (perf_counter) or CUDA (events), after a barrier so ranks start together."""

    def __init__(self, device: str, group: dist.ProcessGroup | None = None) -> None:
        self.device, self.group = device, group

    def __call__(self, fn: Callable[[], Any], iters: int = 1) -> float:
        dist.barrier(group=self.group)
        if self.device == "cuda":
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                fn()
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end) / 1e3 / iters
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        return (time.perf_counter() - t0) / iters


def interleaved(variants: dict[str, Callable[[], Any]], timer: Timer, rounds: int, warmup: int = 2) -> dict[str, float]:
    """Median seconds per call of each variant, measured round-robin."""
    for fn in variants.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            samples[name].append(timer(fn))
    return {name: statistics.median(v) for name, v in samples.items()}


def max_over_ranks(value: float) -> float:
    """The slowest rank's value: a step is as slow as its slowest rank."""
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t)


def table(title: str, header: list[str], rows: list[list[Any]], note: str = "") -> str:
    cells = [header] + [[_cell(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) + " |"
    out = [f"### {title}", "", line(cells[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in cells[1:]]
    if note:
        out += ["", note]
    return "\n".join(out)


def _cell(c: Any) -> str:
    if isinstance(c, float):
        return f"{c:.2f}" if abs(c) < 100 else f"{c:.0f}"
    return str(c)


def save(name: str, device: str, payload: dict, path: Path | None = None) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = path or RESULTS / f"{name}{'-cuda' if device == 'cuda' else ''}.json"
    path.write_text(json.dumps({"machine": machine(device), **payload}, indent=2) + "\n")
    return path
