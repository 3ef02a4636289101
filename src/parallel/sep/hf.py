"""Hugging Face models under sep: their attention switched to Ulysses through transformers' AttentionInterface.

No model code is copied: the model's own attention modules project, rotate and reshape as always; only the kernel
between them (SDPA over this rank's chunk) becomes `sep_attention` over the whole sequence. Heads are split by mp
first (tensor parallelism) and then by sep, so the model's heads must divide by mp × sep.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from strategy import StrategyError

from ..topology.groups import HybridGroup
from .attention import sep_attention
from .required import FIELD

__all__ = ["ATTENTION", "check_heads", "install", "is_hugging_face"]

ATTENTION = "parallel_sep"  # the name under which transformers finds it


def is_hugging_face(model: nn.Module) -> bool:
    """A model whose attention transformers dispatches by config._attn_implementation (its heads in the config)."""
    config = getattr(model, "config", None)
    return getattr(config, "num_attention_heads", None) is not None and hasattr(config, "_attn_implementation")


def check_heads(model: nn.Module, hcg: HybridGroup) -> None:
    """Before anything changes: a Hugging Face model's heads split over mp × sep. (A model of one's own attends
    through sep_attention, which checks its heads itself.)"""
    if not is_hugging_face(model):
        return
    config: Any = model.config
    heads: int = config.num_attention_heads
    if heads % (hcg.mp_size * hcg.sep_size):
        raise StrategyError(
            f"{type(model).__name__} has {heads} attention heads, which mp_degree × sep_degree = {hcg.mp_size} × "
            f"{hcg.sep_size} = {hcg.mp_size * hcg.sep_size} does not divide: each sep rank attends over heads / "
            "(mp × sep) of them; change the degrees", field=FIELD)


def install(model: nn.Module, hcg: HybridGroup, *, name: str = ATTENTION,
            kernel: Callable[..., torch.Tensor] = sep_attention) -> None:
    """Register `kernel` (the Ulysses one, or cp's) with transformers under `name` and make the model use it."""
    from transformers import AttentionInterface

    def attention(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                  attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                  is_causal: bool | None = None, **kwargs: Any) -> tuple[torch.Tensor, None]:
        # A causal decoder's mask is the causal triangle over global positions, which the kernel applies itself.
        out = kernel(query, key, value, is_causal=True if is_causal is None else is_causal, scale=scaling, hcg=hcg)
        return out.transpose(1, 2).contiguous(), None

    AttentionInterface.register(name, attention)
    config: Any = model.config
    config._attn_implementation = name
    for sub in model.modules():  # sub-configs a model may carry (text_config, ...) follow
        config = getattr(sub, "config", None)
        if config is not None and hasattr(config, "_attn_implementation"):
            config._attn_implementation = name
