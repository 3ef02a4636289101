"""Rank-side cases of parallel.Meter: small models trained a few steps under a strategy, the meter's records returned."""

from __future__ import annotations

import statistics
import time

import torch
from torch import nn

import parallel
import strategy
from rank_helpers import init, tiny_llama


def _mlp() -> nn.Module:
    """Big enough that a step takes milliseconds: the few microseconds between phases are not 5% of it."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256))


def train(text: str, steps: int, *, sleep_rank: int | None = None, sleep: float = 0.0, grow_rank: int | None = None,
          out: str | None = None) -> dict:
    """Train a small MLP at dp `steps` steps under `text` with a Meter logging every step: rank `sleep_rank` sleeps
    `sleep` s before each backward, rank `grow_rank` touches 256 MiB in each step. Returns every record and, per step,
    the phases' share of the step and the optimizer parts' share of its step."""
    hcg = init(strategy.loads(text))
    model = _mlp()
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-3))
    records: list[dict] = []
    meter = parallel.Meter(hcg, model, tokens_per_step=64, seq_len=1, flops_per_token=1.0, optimizer=opt, out=out,
                           sinks=[records.append], echo=lambda line: None)
    shares, parts = [], []
    g = torch.Generator().manual_seed(hcg.rank)
    for k in range(1, steps + 1):
        with meter.step(k):
            with meter.phase("data"):
                x = torch.randn(64, 256, generator=g)
            with meter.phase("forward"):
                loss = model(x).square().mean()
            if hcg.rank == sleep_rank:
                time.sleep(sleep)
            if hcg.rank == grow_rank:
                held = torch.ones(256 * 2**20 // 4)  # touched: resident
                del held
            with meter.phase("backward"):
                loss.backward()
            with meter.phase("optimizer"):
                opt.step()
                opt.zero_grad()
        last = meter.last
        if last is None or last["step"] != k:
            continue  # not a log step
        mine = last["per_rank"]
        shares.append(sum(mine["phases"][p][hcg.rank] for p in parallel.metrics.PHASES) / mine["step_seconds"][hcg.rank])
        parts.append(sum(opt.timings[p] for p in ("reduce", "clip", "update", "sync")) / opt.timings["total"])
    meter.close()
    return {"rank": hcg.rank, "records": [meter.last] if hcg.rank else records, "last": meter.last,
            "phase_share": statistics.median(shares[2:] or [0]), "optimizer_share": statistics.median(parts[2:] or [0])}


def mfu(text: str, seq: int) -> dict:
    """A tiny Llama parallelised under `text`, one step on an injected clock of 0.5 s: the record's MFU and FLOPs."""
    hcg = init(strategy.loads(text))
    model = parallel.parallelize(tiny_llama(2, vocab=64, seq=seq))
    now = [0.0]
    meter = parallel.Meter(hcg, model, tokens_per_step=4 * seq, seq_len=seq, clock=lambda: now[0], echo=lambda s: None)
    with meter.step(1):
        now[0] += 0.5
    meter.close()
    assert meter.last is not None
    return {"mfu": meter.last["mfu"], "flops_per_token": meter.flops_per_token, "world": hcg.world_size}


def unknown_phase() -> str:
    hcg = init(strategy.DistributedStrategy())
    meter = parallel.Meter(hcg, _mlp(), tokens_per_step=1, seq_len=1, echo=lambda s: None)
    try:
        with meter.phase("loss"):
            pass
    except ValueError as e:
        return str(e)
    finally:
        meter.close()
    return "no error"


def pipeline(text: str, out: str, sleep: float) -> dict:
    """A tiny Llama over pp 2, its second stage's forward `sleep` s slower per micro-batch; two steps under a meter
    logging each: the last record."""
    hcg = init(strategy.loads(text))
    model = parallel.parallelize(tiny_llama(2, vocab=64, seq=16))
    if hcg.pp_rank == 1:
        for layer in model.module.model.layers:
            if layer is not None:
                layer.register_forward_pre_hook(lambda module, args: time.sleep(sleep))
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-3))
    meter = parallel.Meter(hcg, model, tokens_per_step=4 * 16, seq_len=16, out=out, phases=("pipeline",),
                           echo=lambda s: None)
    ids = torch.randint(0, 64, (4, 16), generator=torch.Generator().manual_seed(0))
    losses = []
    for k in (1, 2):
        with meter.step(k):
            with meter.phase("pipeline"):
                losses.append(model.train_batch((ids, ids), opt))
            meter.loss(losses[-1] if model.last else 999.0)  # the log must show the last stage's
    meter.close()
    return {"pp_rank": hcg.pp_rank, "last": meter.last, "events": [tuple(e) for e in model.timer.events],
            "loss": losses[-1]}


def out_of_memory(out: str) -> str:
    """A step that runs out of memory: the error goes on, and the rank's snapshot is written."""
    hcg = init(strategy.DistributedStrategy())
    meter = parallel.Meter(hcg, _mlp(), tokens_per_step=1, seq_len=1, out=out, echo=lambda s: None)
    try:
        with meter.step(3):
            raise torch.OutOfMemoryError("out of memory (a test's)")
    except torch.OutOfMemoryError as e:
        return str(e)
    finally:
        meter.close()
    return "no error"


def moe_flops(text: str, kind: str) -> float:
    """The Meter's FLOPs per token of a small MoE (8 experts, top 2) parallelised under `text`."""
    from hf_models import moe

    hcg = init(strategy.loads(text))
    model = parallel.parallelize(moe(kind))
    meter = parallel.Meter(hcg, model, tokens_per_step=1, seq_len=16, echo=lambda s: None)
    meter.close()
    return meter.flops_per_token
