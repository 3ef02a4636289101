"""Rank-side checks of sequence parallelism: parity with one process, collectives, ordering, saved memory."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import parallel
from parallel.tensor import grads, sequence_linear
from rank_helpers import RecordedWait, close, count_collectives, init, make_strategy, shard

S, B, IN, HID, OUT = 8, 3, 8, 16, 8  # [s, b, h] layout; S divisible by 2 and 4
STEPS, LR = 3, 0.1
# rtol as everywhere; atol 1e-5 for O(1) values whose terms nearly cancel (the residual's gradient plus the
# block's, summed in another order across ranks).
RTOL, ATOL = 1e-5, 1e-5
SP_FLAGS = ("mp_async_allreduce", "mp_fused_linear_param_grad_add", "sp_async_reduce_scatter", "recompute_allgather")


def sp_strategy(world: int, flags=(False, False, False, False), sequence_parallel: bool = True):
    s = make_strategy(world, sequence_parallel=sequence_parallel)
    for name, value in zip(SP_FLAGS, flags):
        setattr(s.hybrid_configs.mp_configs, name, value)
    return s


def _data(step: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(2000 + step))


def mlp_parity(world: int, flags) -> dict:
    """norm -> column -> gelu -> row (+ residual) over STEPS optimizer steps, against one process."""
    hcg = init(sp_strategy(world, flags))
    torch.manual_seed(0)
    ref_norm, ref_up, ref_down = nn.LayerNorm(IN), nn.Linear(IN, HID), nn.Linear(HID, OUT)
    torch.manual_seed(0)
    norm = parallel.mark_sequence_parallel(nn.LayerNorm(IN))
    up = parallel.ColumnParallelLinear(IN, HID, gather_output=False)
    down = parallel.RowParallelLinear(HID, OUT, input_is_parallel=True)
    params = [*norm.parameters(), *up.parameters(), *down.parameters()]
    if hcg.resolved.mp.fused_linear_param_grad_add:
        parallel.add_main_grad(up)
    opt = parallel.HybridParallelOptimizer(torch.optim.SGD(params, lr=LR))
    ref_opt = torch.optim.SGD([*ref_norm.parameters(), *ref_up.parameters(), *ref_down.parameters()], lr=LR)
    for step in range(STEPS):
        x, proj = _data(step, S, B, IN), _data(50 + step, S, B, OUT)
        x_ref, x_par = x.clone().requires_grad_(), x.clone().requires_grad_()
        y_ref = x_ref + ref_down(F.gelu(ref_up(ref_norm(x_ref))))
        (y_ref * proj).sum().backward()
        local = parallel.scatter_to_sequence(x_par)
        y = local + down(F.gelu(up(norm(local))))
        close(y, shard(y_ref, 0, hcg), f"step {step} output (this rank's tokens)", RTOL, ATOL)
        (y * shard(proj, 0, hcg)).sum().backward()
        close(x_par.grad, x_ref.grad, f"step {step} input grad", RTOL, ATOL)
        opt.step()
        opt.zero_grad()
        ref_opt.step()
        ref_opt.zero_grad()
        close(up.weight, shard(ref_up.weight, 0, hcg), f"step {step} column weight", RTOL, ATOL)
        close(up.bias, shard(ref_up.bias, 0, hcg), f"step {step} column bias", RTOL, ATOL)
        close(down.weight, shard(ref_down.weight, 1, hcg), f"step {step} row weight", RTOL, ATOL)
        close(down.bias, ref_down.bias, f"step {step} row bias (sequence-parallel)", RTOL, ATOL)
        close(norm.weight, ref_norm.weight, f"step {step} norm weight (sequence-parallel)", RTOL, ATOL)
    return {name: getattr(hcg.resolved.mp, name) for name in ("sequence_parallel", "sp_async_reduce_scatter", "recompute_allgather")}


def collectives(world: int, flags, layer: str) -> tuple[dict, dict]:
    init(sp_strategy(world, flags))
    if layer == "column":
        module = parallel.ColumnParallelLinear(IN, HID, gather_output=False)
        x = torch.randn(S // world, B, IN, requires_grad=True)
    elif layer == "row":
        module = parallel.RowParallelLinear(HID, OUT, input_is_parallel=True)
        x = torch.randn(S, B, HID // world, requires_grad=True)
    else:
        module = parallel.VocabParallelEmbedding(16, IN)
        x = torch.randint(0, 16, (S, B))
    with count_collectives() as forward:
        y = module(x)
    with count_collectives() as backward:
        y.sum().backward()
    return dict(forward), dict(backward)


def reduce_scatter_order(world: int, async_reduce_scatter: bool, fused: bool) -> list[str]:
    """The order of: dx reduce-scatter launched, dW computed, reduce-scatter waited on."""
    init(sp_strategy(world, (fused, fused, async_reduce_scatter, False)))
    layer = parallel.ColumnParallelLinear(IN, HID, gather_output=False)
    events: list[str] = []
    real_rs, real_dw, real_acc = sequence_linear.reduce_scatter_sequence, grads.weight_grad, grads.accumulate_weight_grad

    def reduce_scatter(*args, async_op=False, **kwargs):
        events.append("reduce_scatter(async)" if async_op else "reduce_scatter")
        out, work = real_rs(*args, async_op=async_op, **kwargs)
        return out, (RecordedWait(work, events) if work is not None else None)

    def weight_grad(*args):
        events.append("dW")
        return real_dw(*args)

    def accumulate(*args):
        events.append("dW")
        return real_acc(*args)

    sequence_linear.reduce_scatter_sequence = reduce_scatter
    grads.weight_grad, grads.accumulate_weight_grad = weight_grad, accumulate
    try:
        layer(torch.randn(S // world, B, IN, requires_grad=True)).sum().backward()
    finally:
        sequence_linear.reduce_scatter_sequence = real_rs
        grads.weight_grad, grads.accumulate_weight_grad = real_dw, real_acc
    return events


def saved_bytes(world: int, recompute: bool) -> dict:
    """Bytes autograd saves for one ColumnParallelLinear forward, and the backward's collectives."""
    init(sp_strategy(world, (False, False, False, recompute)))
    layer = parallel.ColumnParallelLinear(IN, HID, gather_output=False)
    x = torch.randn(S // world, B, IN, requires_grad=True)
    saved: list[int] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = layer(x)
    with count_collectives() as backward:
        y.sum().backward()
    return {"saved": sum(saved), "local_input": x.numel() * 4, "gathered_input": S * B * IN * 4, "backward": dict(backward)}


def row_rejects_an_indivisible_sequence(world: int) -> str:
    init(sp_strategy(world))
    layer = parallel.RowParallelLinear(HID, OUT, input_is_parallel=True)
    try:
        layer(torch.randn(S + 1, B, HID // world))
    except ValueError as e:
        return str(e)
    raise AssertionError("no error for a sequence length not divisible by mp_degree")


def plain_optimizer_is_stopped(world: int) -> list[str]:
    """A plain torch optimizer refuses unsummed sequence-parallel grads; summing them first (or the hybrid
    optimizer) makes the same step work."""
    hcg = init(sp_strategy(world))
    torch.manual_seed(0)
    norm = parallel.mark_sequence_parallel(nn.LayerNorm(IN))
    out = []
    for how in ("plain", "reduced", "hybrid"):
        opt = torch.optim.SGD(norm.parameters(), lr=LR)
        local = parallel.scatter_to_sequence(_data(0, S, B, IN))
        norm(local).pow(2).sum().backward()
        try:
            if how == "reduced":
                parallel.reduce_sequence_parallel_grads(norm)
            (parallel.HybridParallelOptimizer(opt) if how == "hybrid" else opt).step()
            out.append(f"{how}: ok")
        except RuntimeError as e:
            out.append(f"{how}: {e}")
        norm.zero_grad()
    assert hcg.mp_size == world
    return out


def scattered_is_a_copy(world: int) -> bool:
    init(sp_strategy(world))
    x = torch.randn(S, B, IN, requires_grad=True)
    local = parallel.scatter_to_sequence(x)
    local.add_(1.0)  # in place, as a residual stream may be updated: must not touch x or fail
    local.sum().backward()
    return bool(torch.equal(x.grad, torch.ones_like(x)))
