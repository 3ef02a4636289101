"""Which parameters are an ep rank's block of experts: a mark on the parameter that every layer above reads (the
optimizer, clipping, sharding, replica checks and checkpoints treat experts apart from replicated weights)."""

from __future__ import annotations

import torch

__all__ = ["expert_block", "is_expert", "mark_expert"]

_EXPERT = "_parallel_expert"  # (ep_size, ep_rank, the global number of experts)


def mark_expert(p: torch.Tensor, ep_size: int, ep_rank: int, experts: int) -> None:
    setattr(p, _EXPERT, (ep_size, ep_rank, experts))


def is_expert(p: torch.Tensor) -> bool:
    """A parameter (or its state) of this ep rank's block of experts."""
    return getattr(p, _EXPERT, None) is not None


def expert_block(p: torch.Tensor) -> tuple[int, int, int] | None:
    """(ep_size, ep_rank, global experts) of an expert parameter, else None."""
    return getattr(p, _EXPERT, None)
