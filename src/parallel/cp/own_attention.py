"""cp over a model's own attention function: this rank's two query chunks over the all-gathered keys and values, with
the layer's mask at their global positions (a sliding window, chunks), so the model's function applies its scaling,
softcapping and sinks as in one process."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..sep.attention import record_call
from ..sep.layer_attention import LayerAttention, as_mask
from ..sep.split import sequence_positions
from ..topology.groups import HybridGroup
from .attention import CALLS, gather_sequence

__all__ = ["cp_own_attention"]


def cp_own_attention(module: nn.Module, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer: LayerAttention,
                     function: Callable[..., Any], *, hcg: HybridGroup, **kwargs: Any) -> torch.Tensor:
    """`function(module, q, keys, values, mask, **kwargs)` for this cp rank's chunks r and 2·cp − 1 − r: q, k, v
    `[batch, heads, 2·chunk, head_dim]` in, `[batch, 2·chunk, heads, head_dim]` out (the functions' layout)."""
    parts = hcg.cp_size
    record_call(CALLS, parts, q, k)
    keys, values = gather_sequence(k, v, hcg.cp_group, parts)
    mine = sequence_positions(keys.shape[2], hcg, q.device)
    mask = as_mask(layer.allowed(mine, torch.arange(keys.shape[2], device=q.device)), function, q.dtype)
    out, _ = function(module, q, keys, values, mask, **kwargs)
    return out
