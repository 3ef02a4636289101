"""Rank-side checks of a small model and of HybridParallelOptimizer's sync options."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

import parallel
from rank_helpers import ADAMW_EPS, PARITY_ATOL, PARITY_RTOL, close, init, make_strategy, shard
from small_model import BATCH, SEQ, SHARD_DIMS, STEPS, V, twins

LR = 1e-2
ATOL_AT_LR = PARITY_ATOL * LR / 1e-3  # the bound beside ADAMW_EPS grows with lr (it is argued at 1e-3)


def train_matches_single_process(dp: int, mp: int, flags, sync: dict, main_grad: bool) -> list[float]:
    hcg = init(make_strategy(mp, dp=dp, flags=flags, **sync))
    ref, model = twins()
    if main_grad:
        parallel.add_main_grad(model)
    opt_ref = torch.optim.Adam(ref.parameters(), lr=LR, eps=ADAMW_EPS)
    opt = parallel.HybridParallelOptimizer(torch.optim.Adam(model.parameters(), lr=LR, eps=ADAMW_EPS))
    gen = torch.Generator().manual_seed(7)
    losses = []
    for step in range(STEPS):
        ids = torch.randint(0, V, (BATCH, SEQ), generator=gen)
        target = torch.randint(0, V, (BATCH, SEQ), generator=gen)
        loss_ref = ref(ids, target)
        loss_ref.backward()
        opt_ref.step()
        opt_ref.zero_grad()
        rows = slice(hcg.dp_rank * BATCH // dp, (hcg.dp_rank + 1) * BATCH // dp)  # this replica's part of the batch
        loss = model(ids[rows], target[rows])
        loss.backward()
        opt.step()
        opt.zero_grad()
        mean = loss.detach().clone()
        dist.all_reduce(mean, group=hcg.dp_group)
        close(mean / dp, loss_ref.detach(), f"step {step} loss", rtol=1e-5, atol=1e-6)
        losses.append(float(loss_ref))
        refs = dict(ref.named_parameters())
        for name, p in model.named_parameters():
            expected = refs[name].detach()
            if name in SHARD_DIMS:
                expected = shard(expected, SHARD_DIMS[name], hcg)
            close(p.detach(), expected, f"step {step} {name}", rtol=PARITY_RTOL, atol=ATOL_AT_LR)
    if main_grad:
        assert all(float(p.main_grad.abs().sum()) == 0 for p in model.parameters()), "zero_grad must clear main_grad"
    return losses


def sync_flags_act(mode: str, enabled: bool) -> dict:
    """Replicated params, grads and Adam moments that differ across mp ranks end equal when synced."""
    sync = {"sync_param": enabled, "sync_grad": enabled, "sync_moment": enabled, "sync_mode": mode}
    hcg = init(make_strategy(dist.get_world_size(), **sync))
    torch.manual_seed(0)
    row = parallel.RowParallelLinear(8, 4)  # weight sharded, bias replicated
    rank = hcg.mp_rank
    with torch.no_grad():
        row.bias.add_(rank)  # make the replicated copies disagree
    before_bias = row.bias.detach().clone()
    opt = parallel.HybridParallelOptimizer(torch.optim.Adam(row.parameters(), lr=0.0))
    row.bias.grad = torch.full_like(row.bias, float(rank + 1))
    row.weight.grad = torch.full_like(row.weight, float(rank + 1))
    opt.step()
    return {
        "bias": row.bias.detach().tolist(),
        "bias_before": before_bias.tolist(),
        "bias_grad": row.bias.grad.tolist(),
        "weight_grad": row.weight.grad.flatten()[:1].tolist(),
        "bias_exp_avg": opt.state[row.bias]["exp_avg"].tolist(),
        "weight_exp_avg": opt.state[row.weight]["exp_avg"].flatten()[:1].tolist(),
    }


def bf16_params_step_through_fp32_masters() -> tuple[str, str, float]:
    init(make_strategy(dist.get_world_size()))
    layer = parallel.RowParallelLinear(8, 4, dtype=torch.bfloat16)
    parallel.add_main_grad(layer)
    opt = parallel.HybridParallelOptimizer(torch.optim.SGD(layer.parameters(), lr=1e-3))
    before = layer.bias.detach().float().clone()
    layer.bias.main_grad.fill_(1.0)  # an fp32 gradient a bf16 update could not apply exactly
    opt.step()
    master = opt.param_groups[0]["params"][1]
    step = float((before - master.detach()).mean())
    return str(master.dtype), str(layer.bias.dtype), step


def optimizer_survives_zero_grad_without_set_to_none() -> list[float]:
    """main_grad handed to the optimizer must not be added to itself after zero_grad(set_to_none=False)."""
    init(make_strategy(dist.get_world_size()))
    lin = nn.Linear(4, 3)
    parallel.add_main_grad(lin)
    opt = parallel.HybridParallelOptimizer(torch.optim.SGD(lin.parameters(), lr=0.0))
    seen = []
    for _ in range(3):
        lin(torch.ones(2, 4)).sum().backward()
        opt.step()
        seen.append(float(lin.bias.main_grad[0]))
        opt.zero_grad(set_to_none=False)
    return seen


def masters_follow_the_model_and_the_checkpoint() -> tuple[float, float, float]:
    init(make_strategy(dist.get_world_size()))
    model = nn.Linear(4, 3).to(torch.bfloat16)
    opt = parallel.HybridParallelOptimizer(torch.optim.SGD(model.parameters(), lr=0.0))
    model.load_state_dict({k: torch.full_like(v, 5.0) for k, v in model.state_dict().items()})  # after wrapping
    model(torch.ones(2, 4, dtype=torch.bfloat16)).sum().backward()
    opt.step()
    after_load = float(model.weight[0, 0])
    state = opt.state_dict()
    state["fp32_master_params"][0].fill_(1.25)  # a checkpoint with its own fp32 masters
    opt.load_state_dict(state)
    model(torch.ones(2, 4, dtype=torch.bfloat16)).sum().backward()
    opt.step()
    return after_load, float(model.weight[0, 0]), float(state["fp32_master_params"][0][0, 0])


def dp_replicas_start_equal_and_tolerate_unused_parameters() -> tuple[float, float]:
    """dp2: ranks seeded differently end with rank 0's weights; a parameter unused on one rank still reduces."""
    hcg = init(make_strategy(1, dp=dist.get_world_size()))
    torch.manual_seed(100 + hcg.rank)  # deliberately different initialisation per replica
    used, unused = nn.Linear(4, 1), nn.Linear(4, 1)
    opt = parallel.HybridParallelOptimizer(torch.optim.SGD([*used.parameters(), *unused.parameters()], lr=1.0))
    x = torch.ones(1, 4)
    loss = used(x).sum() + (unused(x).sum() if hcg.rank == 0 else 0)
    loss.backward()
    opt.step()
    return float(used.weight[0, 0]), float(unused.weight[0, 0])
