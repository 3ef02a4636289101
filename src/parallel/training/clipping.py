"""The global gradient norm under tensor parallelism, and clipping by it.

Each rank holds only its shard of a split weight, so a per-rank `clip_grad_norm_` sees a different, too
small norm and ranks drift apart. Here a sharded parameter's norm sums its shards over the mp group, a
replicated one counts once, and dp replicas (whose gradients are already averaged) are not counted twice:
the result is what `torch.nn.utils.clip_grad_norm_` returns on the unparallelised model, on every rank.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.distributed as dist

from ..tensor.shards import is_sharded
from ..topology.groups import HybridGroup
from ..topology.guard import guard

__all__ = ["clip_by_global_norm", "global_grad_norm"]


def global_grad_norm(grads: Sequence[tuple[torch.Tensor, torch.Tensor]], hcg: HybridGroup, norm_type: float = 2.0) -> torch.Tensor:
    """The norm of the whole model's gradient, from (parameter, gradient) pairs of this rank, in fp32."""
    norm_type = float(norm_type)
    device = grads[0][1].device if grads else torch.device("cpu")
    sharded = [g for p, g in grads if is_sharded(p)]
    replicated = [g for p, g in grads if not is_sharded(p)]
    if math.isinf(norm_type):
        local = _per_param(sharded, norm_type, device)
        if hcg.mp_size > 1 and local.numel():
            with guard("gradient norm (max over the mp group)", hcg.mp_group):
                dist.all_reduce(local, op=dist.ReduceOp.MAX, group=hcg.mp_group)
        per_param = torch.cat([local, _per_param(replicated, norm_type, device)])
    else:
        # Each sharded parameter's norm**p is the sum of its shards' over the mp group (one all-reduce for all).
        powered = _per_param(sharded, norm_type, device).pow(norm_type)
        if hcg.mp_size > 1 and powered.numel():
            with guard("gradient norm (sum over the mp group)", hcg.mp_group):
                dist.all_reduce(powered, group=hcg.mp_group)
        per_param = torch.cat([powered.pow(1.0 / norm_type), _per_param(replicated, norm_type, device)])
    if not per_param.numel():
        return torch.zeros((), device=device)
    return torch.linalg.vector_norm(per_param, norm_type)  # as torch.nn.utils.clip_grad_norm_ combines them


def _per_param(grads: list[torch.Tensor], norm_type: float, device: torch.device) -> torch.Tensor:
    if not grads:
        return torch.zeros(0, device=device)
    return torch.stack([torch.linalg.vector_norm(g, norm_type, dtype=torch.float32) for g in grads])


def clip_by_global_norm(grads: Sequence[tuple[torch.Tensor, torch.Tensor]], hcg: HybridGroup, max_norm: float,
                        norm_type: float = 2.0, *, error_if_nonfinite: bool = False) -> torch.Tensor:
    """Scale every gradient by min(1, max_norm / (norm + 1e-6)), as torch does; returns the norm before clipping."""
    total = global_grad_norm(grads, hcg, norm_type)
    if error_if_nonfinite and not torch.isfinite(total):
        raise RuntimeError(
            f"The total norm of order {float(norm_type)} for gradients from `parameters` is non-finite, so it cannot be "
            "clipped. To disable this error and scale the gradients by the non-finite norm anyway, set "
            "`error_if_nonfinite=False`"
        )
    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for _, g in grads:
        g.mul_(coef.to(g.dtype))
    return total
