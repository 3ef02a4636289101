"""Rank-side: clip_grad_norm_ against torch's on the unparallelised model; check_replicas."""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

import parallel
from rank_helpers import close, init, make_strategy
from small_model import BATCH, SEQ, SHARD_DIMS, V, Parallel, twins

STEPS = 4


def clipped_training(dp: int, mp: int, flags, norm_type: float, max_norm: float) -> list[float]:
    """Several SGD steps clipped by the global norm: norms and parameters match the single process."""
    hcg = init(make_strategy(mp, dp=dp, flags=flags))
    ref, model = twins()
    if hcg.resolved.mp.fused_linear_param_grad_add:
        parallel.add_main_grad(model)  # the fused flag accumulates into main_grad: clipping must read it there
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.5)
    opt = parallel.HybridParallelOptimizer(torch.optim.SGD(model.parameters(), lr=0.5))
    gen = torch.Generator().manual_seed(11)
    norms = []
    for step in range(STEPS):
        ids = torch.randint(0, V, (BATCH, SEQ), generator=gen)
        target = torch.randint(0, V, (BATCH, SEQ), generator=gen)
        ref(ids, target).backward()
        expected = torch.nn.utils.clip_grad_norm_(ref.parameters(), max_norm, norm_type)
        opt_ref.step()
        opt_ref.zero_grad()
        rows = slice(hcg.dp_rank * BATCH // dp, (hcg.dp_rank + 1) * BATCH // dp)
        model(ids[rows], target[rows]).backward()
        norm = opt.clip_grad_norm_(max_norm, norm_type)
        close(norm, expected, f"step {step} norm", rtol=1e-6, atol=0)
        opt.step()
        opt.zero_grad()
        refs = dict(ref.named_parameters())
        for name, p in model.named_parameters():
            full = refs[name].detach()
            want = full.chunk(hcg.mp_size, dim=SHARD_DIMS[name])[hcg.mp_rank] if name in SHARD_DIMS else full
            close(p, want, f"step {step} {name}", rtol=1e-5, atol=1e-6)
        norms.append(float(norm))
    assert all(n > max_norm for n in norms), "the test must actually clip"
    return norms


def nonfinite(mp: int) -> tuple[str, bool]:
    init(make_strategy(mp))
    torch.manual_seed(0)
    model = Parallel()
    opt = parallel.HybridParallelOptimizer(torch.optim.SGD(model.parameters(), lr=0.1))
    ids = torch.randint(0, V, (BATCH, SEQ))
    model(ids, ids).backward()
    if dist.get_rank() == 1:
        model.up.weight.grad[0, 0] = float("nan")  # one shard of one rank
    norm = opt.clip_grad_norm_(1.0)
    try:
        opt.clip_grad_norm_(1.0, error_if_nonfinite=True)
    except RuntimeError as e:
        return str(e), math.isnan(float(norm))
    raise AssertionError("no error")


def replicas(dp: int, mp: int, perturb: bool) -> str:
    hcg = init(make_strategy(mp, dp=dp))
    torch.manual_seed(0)
    model = Parallel()
    opt = parallel.HybridParallelOptimizer(torch.optim.SGD(model.parameters(), lr=0.1))
    ids = torch.randint(0, V, (BATCH, SEQ), generator=torch.Generator().manual_seed(3))
    model(ids, ids).backward()
    opt.step()
    model(ids, ids).backward()
    if perturb and dist.get_rank() == 1:
        with torch.no_grad():
            model.down.bias.add_(1e-3)  # a row-parallel bias: replicated across the mp group
    try:
        parallel.check_replicas(model)
    except parallel.ReplicaMismatchError as e:
        return str(e)
    assert hcg.world_size == dp * mp
    return "ok"


def replicas_with_a_nan_on_one_rank() -> str:
    init(make_strategy(2))
    torch.manual_seed(0)
    model = Parallel()
    if dist.get_rank() == 1:
        with torch.no_grad():
            model.norm.weight[0] = float("nan")
    try:
        parallel.check_replicas(model, grads=False)
    except parallel.ReplicaMismatchError as e:
        return str(e)
    raise AssertionError("a NaN on one rank passed the check")


def frozen_parameters_stay_put_with_main_grad() -> bool:
    init(make_strategy(2, flags=(True, False, True)))
    torch.manual_seed(0)
    model = Parallel()
    model.norm.weight.requires_grad_(False)
    parallel.add_main_grad(model)
    before = model.norm.weight.detach().clone()
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.5))
    ids = torch.randint(0, V, (BATCH, SEQ))
    model(ids, ids).backward()
    opt.step()
    return torch.equal(before, model.norm.weight) and getattr(model.norm.weight, "main_grad", None) is None
