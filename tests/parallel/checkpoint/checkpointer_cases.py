"""Rank-side cases of parallel.Checkpointer: what a checkpoint carries besides tensors, keep_last, a truncated newest
checkpoint, a directory of another model, and a background save taking the state of its step."""

from __future__ import annotations

import random
import warnings
from pathlib import Path

import torch
from torch import nn

import parallel
import strategy
from rank_helpers import init

DP2 = "hybrid_configs { dp_degree: 2 }"


class Counter:
    """A data position of one's own: how many batches were read."""

    def __init__(self) -> None:
        self.read = 0

    def state_dict(self) -> dict:
        return {"read": self.read}

    def load_state_dict(self, state: dict) -> None:
        self.read = state["read"]


def _model(width: int = 8) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Linear(width, 4))


def _train(model, opt, scheduler, data: Counter, hcg, steps: range, ckpt: parallel.Checkpointer | None) -> list[float]:
    """Steps whose batches and dropout-like noise come from the RNGs (so only restored RNGs continue exactly)."""
    losses = []
    for step in steps:
        x = torch.randn(4, model[0].in_features) + hcg.rank  # torch's RNG, per rank
        noise = random.random()  # Python's
        loss = (model(x).pow(2).mean() * (1 + noise))
        loss.backward()
        opt.step()
        opt.zero_grad()
        scheduler.step()
        data.read += 1
        losses.append(float(loss))
        if ckpt is not None:
            ckpt.step(step + 1)
    return losses


def _setup(width: int = 8):
    model = _model(width)
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-2))
    scheduler = torch.optim.lr_scheduler.StepLR(opt.optimizer, step_size=2, gamma=0.5)
    return model, opt, scheduler, Counter()


def continues_exactly(directory: str, async_save: bool) -> dict:
    """6 steps straight vs 4 steps (saved every 2) and a fresh start (other seeds) resuming for the last 2: the same
    losses, parameters, scheduler and data position, because the RNGs came back too."""
    hcg = init(strategy.loads(DP2))
    settings = strategy.CheckpointSettings(dir=directory, every_steps=2, async_save=async_save)
    torch.manual_seed(100 + hcg.rank)
    random.seed(7 + hcg.rank)
    model, opt, scheduler, data = _setup()
    straight = _train(model, opt, scheduler, data, hcg, range(6), None)
    final = [p.detach().clone() for p in model.parameters()]

    torch.manual_seed(100 + hcg.rank)
    random.seed(7 + hcg.rank)
    model, opt, scheduler, data = _setup()
    ckpt = parallel.Checkpointer(hcg, settings=settings)
    assert ckpt.start(model, opt, scheduler=scheduler, data=data) == 0
    first = _train(model, opt, scheduler, data, hcg, range(4), ckpt)
    ckpt.close()

    torch.manual_seed(999)  # nothing but the checkpoint may carry the state over
    random.seed(999)
    model, opt, scheduler, data = _setup()
    ckpt = parallel.Checkpointer(hcg, settings=settings)
    start = ckpt.start(model, opt, scheduler=scheduler, data=data)
    rest = _train(model, opt, scheduler, data, hcg, range(start, 6), ckpt)
    ckpt.close()
    same = all(torch.equal(a, b) for a, b in zip(model.parameters(), final))
    return {"start": start, "straight": straight, "resumed": first + rest, "same_parameters": same,
            "lr": scheduler.get_last_lr(), "read": data.read, "kept": sorted(p.name for p in Path(directory).iterdir())}


def keeps_the_newest(directory: str, keep_last: int) -> list[str]:
    """Five saves with keep_last: what is left."""
    hcg = init(strategy.loads(DP2))
    model, opt, scheduler, data = _setup()
    ckpt = parallel.Checkpointer(hcg, settings=strategy.CheckpointSettings(dir=directory, every_steps=1,
                                                                             keep_last=keep_last))
    ckpt.start(model, opt, scheduler=scheduler, data=data)
    _train(model, opt, scheduler, data, hcg, range(5), ckpt)
    ckpt.close()
    return sorted(p.name for p in Path(directory).iterdir())


def skips_a_truncated_newest(directory: str) -> dict:
    """Saves at 2 and 4, then a data file of step-4 cut short: resuming warns naming it and takes step-2."""
    import torch.distributed as dist

    hcg = init(strategy.loads(DP2))
    settings = strategy.CheckpointSettings(dir=directory, every_steps=2)
    model, opt, scheduler, data = _setup()
    ckpt = parallel.Checkpointer(hcg, settings=settings)
    ckpt.start(model, opt, scheduler=scheduler, data=data)
    _train(model, opt, scheduler, data, hcg, range(4), ckpt)
    if hcg.rank == 0:
        shard = sorted((Path(directory) / "step-4").glob("*.distcp"))[-1]
        shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    dist.barrier()
    model, opt, scheduler, data = _setup()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = parallel.Checkpointer(hcg, settings=settings).start(model, opt, scheduler=scheduler, data=data)
    return {"start": start, "read": data.read, "warnings": [str(w.message) for w in caught]}


def refuses_another_model(directory: str) -> dict:
    """A directory holding checkpoints of a model of another width: an error naming the first key and both shapes;
    the model is left as it was."""
    hcg = init(strategy.loads(DP2))
    settings = strategy.CheckpointSettings(dir=directory, every_steps=1)
    model, opt, scheduler, data = _setup(8)
    ckpt = parallel.Checkpointer(hcg, settings=settings)
    ckpt.start(model, opt, scheduler=scheduler, data=data)
    _train(model, opt, scheduler, data, hcg, range(1), ckpt)
    other, opt, scheduler, data = _setup(6)
    before = [p.detach().clone() for p in other.parameters()]
    try:
        parallel.Checkpointer(hcg, settings=settings).start(other, opt, scheduler=scheduler, data=data)
    except ValueError as e:
        return {"error": str(e), "untouched": all(torch.equal(a, b) for a, b in zip(other.parameters(), before))}
    return {"error": None}


def background_save_takes_its_steps_state(directory: str) -> dict:
    """An async save, then the parameters changed at once: the checkpoint holds the values of its step."""
    hcg = init(strategy.loads(DP2))
    model, opt, scheduler, data = _setup()
    ckpt = parallel.Checkpointer(hcg, settings=strategy.CheckpointSettings(dir=directory, async_save=True))
    ckpt.start(model, opt, scheduler=scheduler, data=data)
    _train(model, opt, scheduler, data, hcg, range(1), None)
    saved = [p.detach().clone() for p in model.parameters()]
    ckpt.save(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)  # while the write may still run
    ckpt.close()
    fresh, opt, scheduler, data = _setup()
    start = parallel.Checkpointer(hcg, settings=strategy.CheckpointSettings(dir=directory)).start(fresh, opt)
    return {"start": start, "equal": all(torch.equal(a, b) for a, b in zip(fresh.parameters(), saved))}
