"""Parameters replicated over the mp group whose gradient each rank holds only a part of (Hugging Face's style
"replicated_with_grad_allreduce"): a norm applied per head after a column-parallel projection (Qwen3's q_norm and
k_norm) sees only its rank's heads, so the true gradient is the sum over the mp group, taken before every step."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
from torch import nn

from ..topology.coalesced import all_reduce_coalesced
from ..topology.groups import HybridGroup

__all__ = ["is_partial_over_mp", "mark_partial_over_mp", "sum_partial_grads"]

_PARTIAL = "_parallel_grad_partial_over_mp"


def mark_partial_over_mp(params: Iterable[nn.Parameter]) -> None:
    for p in params:
        setattr(p, _PARTIAL, True)


def is_partial_over_mp(p: torch.Tensor) -> bool:
    return bool(getattr(p, _PARTIAL, False))


def sum_partial_grads(grads: Sequence[tuple[torch.Tensor, torch.Tensor]], hcg: HybridGroup) -> None:
    """The sum over the mp group of each such parameter's gradient, in place: [(param, grad), ...]."""
    chosen = [g for p, g in grads if is_partial_over_mp(p)]
    if chosen and hcg.mp_size > 1:
        all_reduce_coalesced(chosen, hcg.mp_group, average=False)
