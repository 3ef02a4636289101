"""Which parameters are split across the mp group, and how a shard is cut from (or initialised like) the full tensor."""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["SHARD_DIM", "divide", "is_sharded", "mark_sharded", "shard_of"]

# The marker: a sharded parameter carries the dim it is split along. Not `is_distributed`, which is a
# method of torch.Tensor (getattr of it is always truthy).
SHARD_DIM = "mp_shard_dim"


def mark_sharded(param: nn.Parameter, dim: int) -> nn.Parameter:
    setattr(param, SHARD_DIM, dim)
    return param


def is_sharded(param: torch.Tensor) -> bool:
    """True for a parameter split across the mp group; everything else is replicated there."""
    return getattr(param, SHARD_DIM, None) is not None


def divide(layer: str, what: str, size: int, mp_size: int) -> int:
    """size / mp_size, or a ValueError naming the layer, the size and the fix."""
    if size % mp_size:
        raise ValueError(
            f"{layer}: {what}={size} is not divisible by mp_degree={mp_size}; "
            f"use a multiple of {mp_size} (e.g. {math.ceil(size / mp_size) * mp_size}) or another mp_degree"
        )
    return size // mp_size


def shard_of(full: torch.Tensor, dim: int, rank: int, parts: int) -> torch.Tensor:
    """Rank's contiguous block of `full` along `dim`, as a new contiguous tensor."""
    return full.chunk(parts, dim=dim)[rank].contiguous().clone()


def shard_init_generator(device: torch.device | str | None, mp_rank: int) -> torch.Generator:
    """A generator for per-shard init: seeded from torch's current seed and the mp rank, so shards differ."""
    gen = torch.Generator(device=device or "cpu")
    gen.manual_seed((torch.initial_seed() * 1_000_003 + mp_rank + 1) % (1 << 63))  # an unseeded run's seed is 64-bit
    return gen
