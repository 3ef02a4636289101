"""The global gradient norm under tensor parallelism, and clipping by it.

Each rank holds only its shard of a split weight, so a per-rank `clip_grad_norm_` sees a different, too
small norm and ranks drift apart. Here a sharded parameter's norm sums its shards over the mp group, a
replicated one counts once, and dp replicas (whose gradients are already averaged) are not counted twice, nor is
the last stage's copy of a weight tied across pipeline stages; a gradient FSDP2 shards over the sharding group sums
its shards there too, and pipeline stages combine theirs: the result is what `torch.nn.utils.clip_grad_norm_` returns on the unparallelised model, on every rank.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.distributed as dist

from ..tensor.shards import is_sharded
from ..topology.experts_mark import is_expert
from ..topology.tied_mark import is_tied_replica
from ..topology.dtensors import is_data_sharded, local
from ..topology.groups import HybridGroup
from ..topology.guard import guard

__all__ = ["clip_by_global_norm", "global_grad_norm"]


def global_grad_norm(grads: Sequence[tuple[torch.Tensor, torch.Tensor]], hcg: HybridGroup, norm_type: float = 2.0) -> torch.Tensor:
    """The norm of the whole model's gradient, from (parameter, gradient) pairs of this rank, in fp32."""
    norm_type = float(norm_type)
    device = grads[0][1].device if grads else torch.device("cpu")
    # A parameter's gradient may be split over the mp group (the parallel layers) and over the sharding group
    # (FSDP2): its norm combines the local shards' over each group it is split across. Experts are split over the ep
    # group (each rank holds a block), and FSDP2 shards a block over moe_sharding: their norms combine there.
    kinds: dict[tuple[str, ...], list[torch.Tensor]] = {}
    for p, g in grads:
        if is_tied_replica(p):  # the last stage's copy of a weight tied across stages: the first stage's counts it
            continue
        expert = is_expert(p)
        split = (("mp",) if is_sharded(p) else ()) + (("ep",) if expert else ())
        if is_data_sharded(p):
            split += ("moe_sharding",) if expert else ("sharding",)
        kinds.setdefault(tuple(a for a in split if getattr(hcg, f"{a}_size") > 1), []).append(local(g))
    inf = math.isinf(norm_type)
    parts = []
    for axes, tensors in sorted(kinds.items(), reverse=True):
        values = _per_param(tensors, norm_type, device)
        values = values if inf else values.pow(norm_type)
        for axis in axes:
            group = getattr(hcg, f"{axis}_group")
            with guard(f"gradient norm ({'max' if inf else 'sum'} over the {axis} group)", group):
                dist.all_reduce(values, op=dist.ReduceOp.MAX if inf else dist.ReduceOp.SUM, group=group)
        parts.append(values if inf else values.pow(1.0 / norm_type))
    per_param = torch.cat(parts) if parts else torch.zeros(0, device=device)
    total = torch.linalg.vector_norm(per_param, norm_type) if per_param.numel() else torch.zeros((), device=device)
    if hcg.pp_size > 1:  # every pipeline stage holds other parameters: combine the stages' norms
        total = total.float() if inf else total.float().pow(norm_type)
        with guard(f"gradient norm ({'max' if inf else 'sum'} over the pp group)", hcg.pp_group):
            dist.all_reduce(total, op=dist.ReduceOp.MAX if inf else dist.ReduceOp.SUM, group=hcg.pp_group)
        total = total if inf else total.pow(1.0 / norm_type)
    return total  # as torch.nn.utils.clip_grad_norm_ combines them


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
        local(g).mul_(coef.to(g.dtype))
    return total
