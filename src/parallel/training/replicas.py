"""`check_replicas`: every copy of a parameter that should be identical is identical (or says where not).

Replicated parameters (norms, row-parallel biases, sequence-parallel norms) drifting apart across the mp
group, or dp replicas diverging, silently ruins a run. One MAX and one MIN all-reduce of all values per
group finds any difference; only then is the first offending parameter gathered to name the ranks.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from ..tensor.partial import is_partial_over_mp
from ..tensor.sequence import is_sequence_parallel
from ..tensor.shards import is_sharded
from ..topology.dtensors import local
from ..topology.experts_mark import is_expert
from ..topology.groups import SEQUENCE_AXES, HybridGroup, current
from ..topology.guard import guard
from ..topology.tied_mark import tied_copy

__all__ = ["ReplicaMismatchError", "check_replicas"]


class ReplicaMismatchError(RuntimeError):
    """Copies of a parameter (or of its gradient) that should agree across ranks do not."""


@torch.no_grad()
def check_replicas(model: nn.Module, *, grads: bool = True, atol: float = 0.0, hcg: HybridGroup | None = None) -> int:
    """Compare what should be identical, raising ReplicaMismatchError (on every rank) naming the first parameter
    that differs, the ranks and the largest difference.

    Across the mp group: every replicated parameter, and with `grads` its gradient (`main_grad` where present;
    not for sequence-parallel parameters, whose gradients are per-rank until summed). Across dp replicas: every
    parameter, sharded ones included (gradients differ there until they are averaged in the step). Parameters
    FSDP2 shards over the sharding group are compared shard by shard (the sharding group holds no replicas). A weight tied
across pipeline stages is compared between the first and the last stage's copies (the embedding group). Call it
    between steps, every N steps; it costs two all-reduces per group. Returns how many tensors it compared (0 when
    this rank has no replicas), so a caller can say that the check passed and what it covered.
    """
    hcg = hcg or current()
    named = list(model.named_parameters())
    checks: list[tuple[str, str, list[tuple[str, torch.Tensor]]]] = []
    if hcg.mp_size > 1:  # (experts are no replicas over mp: their ep group may span the mp ranks)
        replicated = [(n, p) for n, p in named if not is_sharded(p) and not is_expert(p)]
        values = [(n, p.detach()) for n, p in replicated]
        if grads:
            values += [(f"{n} (gradient)", g) for n, p in replicated
                       if not is_sequence_parallel(p) and not is_partial_over_mp(p) and (g := _grad(p)) is not None]
        checks.append(("mp", "mp group", values))
    for axis in ("dp", *SEQUENCE_AXES):  # sep and cp ranks hold replicas too: they differ only in the tokens they see
        if getattr(hcg, f"{axis}_size") > 1:  # experts split over ep are no replicas there: their edp ranks hold them
            checks.append((axis, f"{axis} replicas", [(n, p.detach()) for n, p in named if not is_expert(p)]))
    if hcg.edp_size > 1:
        checks.append(("edp", "expert replicas", [(n, p.detach()) for n, p in named if is_expert(p)]))
    # A weight tied across pipeline stages: the last stage's copy is a replica of the first's (in the first's order).
    tied = sorted(((c.key, p.detach()) for _, p in named if (c := tied_copy(p)) is not None), key=lambda kv: kv[0])
    if tied and hcg.embedding_group is not None:
        checks.append(("embedding", "first and last stage's copies", tied))
    for axis, what, values in checks:
        if values:
            _compare(values, axis, what, atol, hcg)
    return sum(len(values) for _, _, values in checks)


def _grad(p: torch.Tensor) -> torch.Tensor | None:
    main = getattr(p, "main_grad", None)
    return main if main is not None else p.grad


def _compare(values: list[tuple[str, torch.Tensor]], axis: str, what: str, atol: float, hcg: HybridGroup) -> None:
    group = getattr(hcg, f"{axis}_group")
    values = [(name, local(t)) for name, t in values]  # FSDP2's shards: the same shard on every replica
    flat = torch.cat([t.reshape(-1).to(torch.float64) for _, t in values])
    # A NaN agrees with nothing: as +inf in the max and -inf in the min, every rank sees an infinite spread.
    nan = torch.isnan(flat)
    high = torch.where(nan, float("inf"), flat)
    low = torch.where(nan, float("-inf"), flat)
    with guard(f"replica check over the {what}", group):
        dist.all_reduce(high, op=dist.ReduceOp.MAX, group=group)
        dist.all_reduce(low, op=dist.ReduceOp.MIN, group=group)
    spread = torch.nan_to_num(high - low, nan=float("inf"))  # inf - inf: a NaN somewhere
    if float(spread.max()) <= atol:
        return
    offset = 0
    for name, t in values:
        part = spread[offset: offset + t.numel()]
        offset += t.numel()
        if float(part.max()) > atol:
            raise ReplicaMismatchError(_describe(name, t, axis, what, group, hcg))


def _describe(name: str, t: torch.Tensor, axis: str, what: str, group: dist.ProcessGroup, hcg: HybridGroup) -> str:
    """Gather the offending tensor from the group: which ranks differ from its first rank, and by how much."""
    local = t.detach().to(torch.float64).contiguous()
    copies = [torch.empty_like(local) for _ in range(dist.get_world_size(group))]
    with guard(f"replica check over the {what}", group):
        dist.all_gather(copies, local, group=group)
    ranks = list(getattr(hcg, f"{axis}_ranks"))
    diffs = [float((c - copies[0]).abs().max()) for c in copies]
    differing = [r for r, d in zip(ranks, diffs) if d > 0 or d != d]
    return (f"{name} differs across the {what} {ranks}: ranks {differing} differ from rank {ranks[0]} by up to "
            f"{max(diffs):.3g}; replicated values must stay identical (check that every rank applies the same update, "
            "or turn on hybrid_configs.mp_configs.sync_param)")
