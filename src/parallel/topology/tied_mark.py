"""Which parameters are a pipeline's two copies of one tied weight (an LM head sharing the embedding's, its uses on the
first and the last stage's ranks): a mark on each copy that the optimizer, clipping, replica checks and checkpoints read."""

from __future__ import annotations

from typing import NamedTuple

import torch

__all__ = ["TiedCopy", "is_tied_copy", "is_tied_replica", "mark_tied", "tied_copy"]

_TIED = "_parallel_tied_copy"


class TiedCopy(NamedTuple):
    """`key`: the weight's name on the first stage (the embedding's, the one checkpoints store it under); `primary`:
    this is the first stage's copy (the last stage's is its replica, left out of the gradient norm)."""

    key: str
    primary: bool


def mark_tied(p: torch.Tensor, *, key: str, primary: bool) -> None:
    setattr(p, _TIED, TiedCopy(key, primary))


def tied_copy(p: torch.Tensor) -> TiedCopy | None:
    return getattr(p, _TIED, None)


def is_tied_copy(p: torch.Tensor) -> bool:
    """One of the two copies (first or last stage) of a weight tied across pipeline stages."""
    return getattr(p, _TIED, None) is not None


def is_tied_replica(p: torch.Tensor) -> bool:
    """The last stage's copy of a weight tied across pipeline stages: a replica of the first stage's."""
    copy = getattr(p, _TIED, None)
    return copy is not None and not copy.primary
