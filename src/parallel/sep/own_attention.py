"""Ulysses over a model's own attention function: after the all-to-all each sep rank holds whole sequences of some
heads, so the model's function runs as in one process, with its layer's mask over the whole sequence (a sliding
window, chunks), its softcapping and its sinks (those of the heads this rank holds)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..topology.groups import HybridGroup
from .attention import CALLS, heads_to_sequence, record_call, repeat_kv_for, sequence_to_heads
from .layer_attention import LayerAttention, as_mask

__all__ = ["HeadGroup", "sep_own_attention"]


class HeadGroup:
    """The attention module as a function sees it for a group of its heads: each per-head parameter (sinks) is the
    group's slice, and the query/key-value ratio is the group's."""

    def __init__(self, module: nn.Module, heads: slice, total: int, kv_groups: int) -> None:
        self._module, self._heads, self._total = module, heads, total
        self.num_key_value_groups = kv_groups

    def __getattr__(self, name: str) -> Any:
        return per_head(getattr(self._module, name), self._heads, self._total)


def per_head(value: Any, heads: slice, total: int) -> Any:
    """`value`'s rows for `heads` when it is a tensor with one row per head, else `value`."""
    if isinstance(value, torch.Tensor) and value.dim() >= 1 and value.shape[0] == total:
        return value[heads]
    return value


def sep_own_attention(module: nn.Module, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer: LayerAttention,
                      function: Callable[..., Any], *, hcg: HybridGroup, **kwargs: Any) -> torch.Tensor:
    """`function(module, q, k, v, mask, **kwargs)` over the whole sequence for this sep rank's chunk: q, k, v
    `[batch, heads, chunk, head_dim]` in, `[batch, chunk, heads, head_dim]` out (the functions' layout)."""
    parts, group = hcg.sep_size, hcg.sep_group
    record_call(CALLS, parts, q, k)
    heads = q.shape[1]
    k, v = repeat_kv_for(q, k, v, parts)
    q, k, v = (sequence_to_heads(t, group, parts) for t in (q, k, v))
    mine = slice(hcg.sep_rank * q.shape[1], (hcg.sep_rank + 1) * q.shape[1])
    positions = torch.arange(q.shape[2], device=q.device)
    mask = as_mask(layer.allowed(positions, positions), function, q.dtype)
    if kwargs.get("s_aux") is not None:  # (gpt-oss hands its sinks to flash kernels too)
        kwargs["s_aux"] = per_head(kwargs["s_aux"], mine, heads)
    view = HeadGroup(module, mine, heads, q.shape[1] // k.shape[1])
    out, _ = function(view, q, k, v, mask, **kwargs)  # [batch, sequence, heads / parts, head_dim]
    return heads_to_sequence(out.transpose(1, 2), group, parts).transpose(1, 2)
