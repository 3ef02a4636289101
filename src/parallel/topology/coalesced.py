"""Coalesced collectives: one flat buffer per dtype, so a step costs one collective per dtype, not per tensor."""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.distributed as dist
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from .dtensors import local
from .guard import guard

__all__ = ["all_reduce_coalesced", "broadcast_coalesced"]


def _by_dtype(tensors: list[torch.Tensor]) -> Iterator[list[torch.Tensor]]:
    buckets: dict[tuple[torch.dtype, torch.device], list[torch.Tensor]] = {}
    for t in tensors:
        buckets.setdefault((t.dtype, t.device), []).append(t)
    yield from buckets.values()


def all_reduce_coalesced(tensors: list[torch.Tensor], group: dist.ProcessGroup, *, average: bool) -> None:
    """One all-reduce per dtype over a flat buffer, results copied back in place (DTensors: their local shards)."""
    tensors = [local(t) for t in tensors]
    size = dist.get_world_size(group)
    for bucket in _by_dtype(tensors):
        flat = _flatten_dense_tensors(bucket)
        with guard("gradient/parameter all-reduce", group):
            dist.all_reduce(flat, group=group)
        if average:
            flat.div_(size)
        for t, synced in zip(bucket, _unflatten_dense_tensors(flat, bucket)):
            t.copy_(synced)


def broadcast_coalesced(tensors: list[torch.Tensor], group: dist.ProcessGroup) -> None:
    """Copy the group's first rank's values to every rank of it, one broadcast per dtype (DTensors: local shards)."""
    tensors = [local(t) for t in tensors]
    for bucket in _by_dtype(tensors):
        flat = _flatten_dense_tensors(bucket)
        with guard("broadcast from the group's first rank", group):
            dist.broadcast(flat, group=group, group_src=0)
        for t, synced in zip(bucket, _unflatten_dense_tensors(flat, bucket)):
            t.copy_(synced)
