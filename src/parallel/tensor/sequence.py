"""Sequence parallelism: activations outside the column -> row pairs split along the sequence across the mp group.

The collectives come in transpose pairs: an all-gather along the sequence has a reduce-scatter (or a split)
as its backward, and the other way round. `scatter_to_sequence` / `gather_from_sequence` enter and leave
the region; parameters that live in it (norm weights) see only their rank's tokens, so their gradients are
summed over the mp group before the optimizer step (`mark_sequence_parallel`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
import torch.distributed as dist
from torch import nn
from torch.autograd import Function

from ..topology.coalesced import all_reduce_coalesced
from ..topology.groups import HybridGroup, current
from ..topology.guard import guard
from .grads import grad_of
from .shards import is_sharded

__all__ = [
    "all_gather_sequence",
    "gather_from_sequence",
    "is_sequence_parallel",
    "mark_sequence_parallel",
    "reduce_scatter_sequence",
    "reduce_sequence_parallel_grads",
    "scatter_to_sequence",
    "split_sequence",
]

SEQUENCE_PARALLEL = "sequence_parallel"  # the marker attribute on parameters that live in the region
_UNREDUCED = "_sequence_parallel_grad_unreduced"


def check_length(layer: str, length: int, parts: int, dim: int) -> None:
    if length % parts:
        raise ValueError(
            f"{layer}: sequence length {length} (dim {dim}) is not divisible by mp_degree={parts}; sequence "
            f"parallelism splits it evenly: pad the sequence to a multiple of {parts}, or turn sequence_parallel off"
        )


def _front(t: torch.Tensor, dim: int) -> torch.Tensor:
    """`t` with `dim` moved first, contiguous: the layout the flat collectives cut along."""
    return (t if dim == 0 else t.movedim(dim, 0)).contiguous()


def _back(t: torch.Tensor, dim: int) -> torch.Tensor:
    return t if dim == 0 else t.movedim(0, dim)


def all_gather_sequence(t: torch.Tensor, dim: int, group: dist.ProcessGroup, *, async_op: bool = False):
    """Every rank's `t` concatenated along `dim`, in rank order: (result, work handle or None).

    With `async_op` the result is valid only after `handle.wait()`.
    """
    parts = dist.get_world_size(group)
    src = _front(t, dim)
    out = src.new_empty((src.shape[0] * parts, *src.shape[1:]))
    with guard("sequence all-gather", group):
        work = dist.all_gather_single(out, src, group=group, async_op=async_op)
    return _back(out, dim), work


def reduce_scatter_sequence(t: torch.Tensor, dim: int, group: dist.ProcessGroup, *, async_op: bool = False, layer: str = "reduce-scatter"):
    """The sum of every rank's `t`, this rank's block of it along `dim`: (result, work handle or None)."""
    parts = dist.get_world_size(group)
    check_length(layer, t.shape[dim], parts, dim)
    src = _front(t, dim)
    out = src.new_empty((src.shape[0] // parts, *src.shape[1:]))
    with guard("sequence reduce-scatter", group):
        work = dist.reduce_scatter_single(out, src, group=group, async_op=async_op)
    return _back(out, dim), work


def split_sequence(t: torch.Tensor, dim: int, group: dist.ProcessGroup, layer: str = "scatter_to_sequence") -> torch.Tensor:
    """This rank's block of `t` along `dim` (no communication)."""
    parts = dist.get_world_size(group)
    check_length(layer, t.shape[dim], parts, dim)
    # A copy, never a view of the input: in-place ops downstream (residual adds, dropout) must not touch it.
    return t.chunk(parts, dim=dim)[dist.get_rank(group)].clone(memory_format=torch.contiguous_format)


class _ScatterToSequence(Function):
    """Split forward; all-gather backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, dim: int, group: dist.ProcessGroup) -> torch.Tensor:
        ctx.dim, ctx.group = dim, group
        return split_sequence(x, dim, group)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return all_gather_sequence(grad, ctx.dim, ctx.group)[0], None, None


class _GatherFromSequence(Function):
    """All-gather forward; split backward (the gradient of a replicated result is the same on every rank)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, dim: int, group: dist.ProcessGroup) -> torch.Tensor:
        ctx.dim, ctx.group = dim, group
        return all_gather_sequence(x, dim, group)[0]

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return split_sequence(grad, ctx.dim, ctx.group, "gather_from_sequence (backward)"), None, None


class ReduceScatterToSequence(Function):
    """Reduce-scatter forward (partial sums in, this rank's summed block out); all-gather backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, dim: int, group: dist.ProcessGroup, layer: str) -> torch.Tensor:
        ctx.dim, ctx.group = dim, group
        return reduce_scatter_sequence(x, dim, group, layer=layer)[0]

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return all_gather_sequence(grad, ctx.dim, ctx.group)[0], None, None, None


def scatter_to_sequence(x: torch.Tensor, *, sequence_dim: int = 0, hcg: HybridGroup | None = None) -> torch.Tensor:
    """Enter the sequence-parallel region: this rank's block of the (replicated) `x` along `sequence_dim`.

    Backward all-gathers the gradient. Unchanged when sequence parallelism is off or mp_degree is 1.

    Example::

        h = parallel.scatter_to_sequence(embeddings, sequence_dim=1)   # [b, s, h] -> [b, s / mp, h]
    """
    hcg = hcg or current()
    if not hcg.resolved.mp.sequence_parallel:
        return x
    return _ScatterToSequence.apply(x, sequence_dim, hcg.mp_group)


def gather_from_sequence(x: torch.Tensor, *, sequence_dim: int = 0, hcg: HybridGroup | None = None) -> torch.Tensor:
    """Leave the sequence-parallel region: the full sequence on every rank (all-gather along `sequence_dim`).

    Backward keeps this rank's block of the gradient, the transpose of `scatter_to_sequence`. Unchanged when
    sequence parallelism is off or mp_degree is 1.
    """
    hcg = hcg or current()
    if not hcg.resolved.mp.sequence_parallel:
        return x
    return _GatherFromSequence.apply(x, sequence_dim, hcg.mp_group)


def is_sequence_parallel(param: torch.Tensor) -> bool:
    return bool(getattr(param, SEQUENCE_PARALLEL, False))


def mark_sequence_parallel(module: nn.Module | Iterable[nn.Parameter], *, hcg: HybridGroup | None = None):
    """Mark the replicated parameters of `module` (a norm in the region) as living in the sequence-parallel
    region: each rank's gradient then covers only its tokens, and the sum over the mp group is the true one.

    HybridParallelOptimizer sums them before stepping. A plain torch optimizer stepping them while the sum
    is still due raises a RuntimeError saying so, instead of training on wrong gradients. Returns `module`.
    """
    hcg = hcg or current()
    for p in module_params(module):
        if is_sharded(p) or is_sequence_parallel(p):
            continue
        setattr(p, SEQUENCE_PARALLEL, True)
        if hcg.resolved.mp.sequence_parallel and p.requires_grad:
            p.register_post_accumulate_grad_hook(flag_unreduced)
            _guard_plain_optimizers()
    return module


def flag_unreduced(p: torch.Tensor) -> None:
    """This parameter's gradient holds a backward's tokens of this rank only: it is due a sum over the mp group."""
    setattr(p, _UNREDUCED, True)


def reduce_sequence_parallel_grads(params: nn.Module | Iterable[nn.Parameter], *, hcg: HybridGroup | None = None) -> None:
    """Sum the gradients (`main_grad` where present, else `.grad`) of the sequence-parallel parameters among
    `params` over the mp group, in place. HybridParallelOptimizer does this itself; a hand-written loop with
    a plain torch optimizer calls it between backward and step."""
    hcg = hcg or current()
    grads = [(p, grad_of(p)) for p in module_params(params)]
    sum_sequence_parallel_grads([(p, g) for p, g in grads if g is not None], hcg)


def module_params(params: nn.Module | Iterable[nn.Parameter]) -> list[nn.Parameter]:
    return list(params.parameters() if isinstance(params, nn.Module) else params)


def sum_sequence_parallel_grads(grads: Sequence[tuple[torch.Tensor, torch.Tensor]], hcg: HybridGroup) -> None:
    """The sum over the mp group of each sequence-parallel parameter's gradient, in place: [(param, grad), ...]."""
    # Only what a backward added since the last sum: summing twice would multiply by mp_degree.
    chosen = [(p, g) for p, g in grads if is_sequence_parallel(p) and getattr(p, _UNREDUCED, False)]
    if not chosen or not hcg.resolved.mp.sequence_parallel:
        return
    all_reduce_coalesced([g for _, g in chosen], hcg.mp_group, average=False)
    for p, _ in chosen:
        setattr(p, _UNREDUCED, False)


_GUARDED: list[object] = []


def _guard_plain_optimizers() -> None:
    """Once per process: any optimizer about to step a sequence-parallel parameter whose gradient was not
    summed over the mp group raises (torch's global step pre-hook)."""
    if _GUARDED:
        return
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    _GUARDED.append(register_optimizer_step_pre_hook(_check_reduced))


def _check_reduced(optimizer: torch.optim.Optimizer, args: object, kwargs: object) -> None:
    for group in optimizer.param_groups:
        for p in group["params"]:
            if getattr(p, _UNREDUCED, False) and p.grad is not None:
                raise RuntimeError(
                    "a sequence-parallel parameter (marked by parallel.mark_sequence_parallel, e.g. a norm weight "
                    f"of shape {tuple(p.shape)}) is being stepped with a gradient from this rank's tokens only; "
                    "its gradient must first be summed over the mp group: step with parallel.HybridParallelOptimizer, "
                    "which does it, or call parallel.reduce_sequence_parallel_grads before optimizer.step()"
                )

