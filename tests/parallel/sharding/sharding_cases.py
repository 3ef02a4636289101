"""Rank-side cases of ZeRO sharding (sharding_degree, sharding_configs.stage) on FSDP2: parity with one process,
what each rank holds, gradient merge, clipping, checkpoints across degrees."""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

import parallel
import strategy
from parallel.introspect import count_collectives
from parallel.topology.dtensors import local
from rank_helpers import ADAMW_EPS, data_mean, init, match_one_process

# Deliberately uneven: 11 vocabulary rows and 20 hidden units do not divide by 4 (FSDP2 pads its shards).
VOCAB, HIDDEN, INNER, ROWS, SEQ, LR = 11, 12, 20, 2, 6, 1e-3


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(HIDDEN)
        self.up = nn.Linear(HIDDEN, INNER)
        self.down = nn.Linear(INNER, HIDDEN)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.down(F.gelu(self.up(self.norm(h))))


class Stack(nn.Module):
    """A small model with blocks (an nn.ModuleList), outside the blocks an embedding, a norm and a head."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.blocks = nn.ModuleList(Block() for _ in range(3))
        self.norm = nn.LayerNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)
        for block in self.blocks:
            h = block(h)
        return F.cross_entropy(self.head(self.norm(h)).flatten(0, 1), labels.flatten())


def sharded_text(sharding: int, stage: int, *, dp: int = 1, mp: int = 1, merge: int = 1) -> str:
    text = (f"hybrid_configs {{ dp_degree: {dp} mp_degree: {mp} sharding_degree: {sharding} "
            f"sharding_configs {{ stage: {stage} }} }}")
    return text + (f" gradient_merge: true gradient_merge_configs {{ k_steps: {merge} avg: true }}" if merge > 1 else "")


def _global_batch(step: int, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randint(0, VOCAB, (rows, SEQ), generator=g), torch.randint(0, VOCAB, (rows, SEQ), generator=g)


def _local_bytes(tensors) -> int:
    return sum(local(t).numel() * local(t).element_size() for t in tensors if t is not None)


def _held(model: nn.Module, opt) -> dict[str, int]:
    """Bytes this rank holds of parameters, gradients and optimizer state (its shards)."""
    params = list(model.parameters())
    state = [v for s in opt.optimizer.state.values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0]
    return {"params": _local_bytes(params), "grads": _local_bytes(p.grad for p in params),
            "state": _local_bytes(state)}


def parity(text: str, steps: int = 3, clip: float | None = None, model_kind: str = "stack", eps: float = ADAMW_EPS) -> dict:
    """`steps` AdamW updates with a different batch per data rank equal one process on the whole batch."""
    hcg = init(strategy.loads(text))
    k = hcg.resolved.gradient_merge.k_steps
    if model_kind == "llama":
        from hf_models import hf_model

        reference = hf_model("llama")
        model = parallel.parallelize(copy.deepcopy(reference))  # the Hugging Face plan, then sharding
    else:
        torch.manual_seed(0)
        reference = Stack()
        model = parallel.parallelize(copy.deepcopy(reference), plan={})
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=LR, eps=eps))
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=LR, eps=eps)
    rows = ROWS * hcg.data_size
    losses, ref_losses, norms, ref_norms, reductions, held = [], [], [], [], [], {}
    for step in range(steps):
        with count_collectives() as counts:
            for micro in range(k):
                ids, labels = _global_batch(step * k + micro, rows)
                mine = slice(hcg.data_rank * ROWS, (hcg.data_rank + 1) * ROWS)
                loss = _loss(model, ids[mine], labels[mine], model_kind)
                loss.backward()
                ref_loss = _loss(reference, ids, labels, model_kind)
                (ref_loss / k).backward()
                losses.append(data_mean(loss, hcg))
                ref_losses.append(float(ref_loss))
                if micro == k - 1 and clip is not None:
                    norms.append(float(opt.clip_grad_norm_(clip)))
                    ref_norms.append(float(torch.nn.utils.clip_grad_norm_(reference.parameters(), clip)))
                opt.step()
                if micro == k - 1:
                    held = _held(model, opt)
                opt.zero_grad()
        reductions.append(counts["reduce_scatter"])
        ref_opt.step()
        ref_opt.zero_grad()
    match_one_process(model, reference)  # the sharded reduction sums in another order: see ADAMW_EPS
    unsharded = _held(reference, _Wrapped(ref_opt))
    unsharded["grads"] = unsharded["params"]
    return {"losses": losses, "ref_losses": ref_losses, "norms": norms, "ref_norms": ref_norms,
            "reductions": reductions, "held": held, "unsharded": unsharded, "units": _units(model)}


def _loss(model: nn.Module, ids: torch.Tensor, labels: torch.Tensor, kind: str) -> torch.Tensor:
    return model(input_ids=ids, labels=labels).loss if kind == "llama" else model(ids, labels)


class _Wrapped:
    def __init__(self, optimizer) -> None:
        self.optimizer = optimizer


def _units(model: nn.Module) -> list[str]:
    from torch.distributed.fsdp import FSDPModule

    return [name for name, m in model.named_modules() if isinstance(m, FSDPModule)]


def no_blocks_error() -> tuple[str, bool]:
    """A model without blocks: a clear error before anything changed."""
    init(strategy.loads(sharded_text(2, 2)))
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    try:
        parallel.parallelize(model, plan={})
    except strategy.StrategyError as e:
        same = all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
        return str(e), same and not any(type(p).__name__ == "DTensor" for p in model.parameters())
    raise AssertionError("no error")


def scaler_skips_together_when_sharded(text: str) -> list[tuple]:
    """fp16 loss scaling over FSDP2 shards: an inf in one rank's gradient shard makes every rank skip the step and
    halve the scale; two clean steps (incr_every_n_steps: 2) double it back."""
    hcg = init(strategy.loads(text + " amp: true amp_configs { init_loss_scaling: 1024 decr_every_n_nan_or_inf: 1 "
                                     "decr_ratio: 0.5 incr_every_n_steps: 2 incr_ratio: 2 }"))
    torch.manual_seed(0)
    model = parallel.parallelize(Stack(), plan={})
    opt = parallel.HybridParallelOptimizer(torch.optim.SGD(model.parameters(), lr=0.1))
    weight = model.blocks[0].up.weight
    log = []
    for step in range(4):
        ids, labels = _global_batch(step, ROWS * hcg.data_size)
        mine = slice(hcg.data_rank * ROWS, (hcg.data_rank + 1) * ROWS)
        with parallel.autocast():
            loss = model(ids[mine], labels[mine])
        opt.scale(loss).backward()
        if step == 0 and dist.get_rank() == dist.get_world_size() - 1:
            local(weight.grad)[0, 0] = float("inf")  # one shard, on one rank only
        before = local(weight).detach().clone()
        opt.step()
        opt.zero_grad()
        log.append((opt.loss_scale, opt.skipped_last_step, not torch.equal(before, local(weight))))
    return log


def example_strategy_trains(path: str, steps: int) -> dict:
    """examples/train_gpt.py's loop under a sharded example strategy, replicas checked, and what it ran with."""
    import importlib
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "examples"))
    gpt = importlib.import_module("train_gpt")
    hcg = init(strategy.load(path))
    summary = gpt.train(gpt.Config(steps=steps, batch_size=8, seq_len=32), hcg, check_replicas=2)
    model, _ = gpt.build(gpt.Config(steps=steps, batch_size=8, seq_len=32), hcg)
    dtypes = sorted({str(local(p).dtype) for p in model.parameters()})
    return {"losses": summary["losses"], "stage": hcg.resolved.sharding.stage, "amp": hcg.resolved.amp.dtype,
            "param_dtypes": dtypes, "units": _units(model)}


def finetune_example_trains(path: str, steps: int) -> dict:
    """examples/finetune_hf.py's model and loop under a sharded example strategy (parallelize shards it)."""
    import argparse
    import importlib
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "examples"))
    finetune = importlib.import_module("finetune_hf")
    hcg = init(strategy.load(path))
    model, encode = finetune.build_model(None, 32)
    parallel.parallelize(model)
    parallel.cast_for_amp(model)
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-3))
    args = argparse.Namespace(steps=steps, batch_size=4, seq_len=32)
    summary = finetune.train(model, opt, encode(finetune.corpus_text()), args, hcg, progress=False)
    return {"losses": summary["losses"], "units": _units(model), "data": (hcg.data_rank, hcg.data_size)}
