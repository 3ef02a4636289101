"""Autograd-aware collectives over the mp group: the four region ops of tensor parallelism.

Each forward/backward pair is the transpose of the other: an identity forward needs an all-reduce
backward (every rank's partial input gradient must be summed), an all-reduce forward needs an
identity backward, and a split along the last dim is undone by an all-gather.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.autograd import Function

from ..topology.guard import guard

__all__ = [
    "all_gather_last",
    "all_reduce",
    "copy_to_mp",
    "gather_from_mp",
    "identity_node",
    "reduce_from_mp",
    "scatter_to_mp",
]


def all_reduce(t: torch.Tensor, group: dist.ProcessGroup, *, async_op: bool = False) -> dist.Work | None:
    """Sum `t` in place across `group` (the one place this package issues an all-reduce on activations)."""
    with guard("all-reduce", group):
        return dist.all_reduce(t, group=group, async_op=async_op)


def all_gather_last(t: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    """Concatenate every rank's `t` along the last dim, in rank order."""
    t = t.contiguous()
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size(group))]
    with guard("all-gather", group):
        dist.all_gather(parts, t, group=group)
    return torch.cat(parts, dim=-1)


def _own_slice(t: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    size, rank = dist.get_world_size(group), dist.get_rank(group)
    return t.chunk(size, dim=-1)[rank].contiguous()


class _CopyToMP(Function):
    """Identity forward; all-reduce of the input gradient backward (Paddle's c_identity)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        # Summed in place: the incoming gradient is the fresh output of the matmul after this op.
        grad = grad.contiguous()
        all_reduce(grad, ctx.group)
        return grad, None


class _ReduceFromMP(Function):
    """All-reduce forward; identity backward — plus a copy of the gradient unless skip_c_identity."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: dist.ProcessGroup, skip_copy: bool) -> torch.Tensor:
        ctx.skip_copy = skip_copy
        if x.is_contiguous():
            ctx.mark_dirty(x)  # summed in place: autograd must know, in case x was saved for backward
        else:
            x = x.contiguous()
        all_reduce(x, group)
        return x

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        # Paddle routes this gradient through a c_identity op (a copy); mp_skip_c_identity hands it on as is.
        return (grad if ctx.skip_copy else grad.clone()), None, None


class _Identity(Function):
    """A separate no-op node (Paddle's c_identity in front of an overlapped linear): what skip_c_identity drops."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad


class _ScatterToMP(Function):
    """Keep this rank's block of the last dim forward; all-gather the gradient backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        ctx.group = group
        return _own_slice(x, group)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return all_gather_last(grad, ctx.group), None


class _GatherFromMP(Function):
    """All-gather the last dim forward; keep this rank's block of the gradient backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        ctx.group = group
        return all_gather_last(x, group)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return _own_slice(grad, ctx.group), None


def copy_to_mp(x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    return _CopyToMP.apply(x, group)


def reduce_from_mp(x: torch.Tensor, group: dist.ProcessGroup, *, skip_copy: bool = True) -> torch.Tensor:
    return _ReduceFromMP.apply(x, group, skip_copy)


def identity_node(x: torch.Tensor) -> torch.Tensor:
    return _Identity.apply(x)


def scatter_to_mp(x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    return _ScatterToMP.apply(x, group)


def gather_from_mp(x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    return _GatherFromMP.apply(x, group)
