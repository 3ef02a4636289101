"""Hugging Face models under sep: their attention switched to Ulysses through transformers' AttentionInterface.

No model code is copied: the model's own attention modules project, rotate and reshape as always; only the kernel
between them becomes the axis' own over the whole sequence: `sep_attention` (or cp's) where a layer is plain causal
attention, else the model's own attention function with the layer's mask at global positions (own_attention.py).
Heads are split by mp first (tensor parallelism) and then by sep, so the model's heads must divide by mp × sep.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from strategy import StrategyError

from ..topology.groups import HybridGroup
from .attention import sep_attention
from .layer_attention import layer_attention, own_function
from .own_attention import sep_own_attention
from .required import FIELD

__all__ = ["ATTENTION", "check_heads", "install", "is_hugging_face"]

ATTENTION = "parallel_sep"  # the name under which transformers finds it
# Implementations whose plain causal layers the axis' own kernels compute alike (the others' math differs: eager's own
# functions may add to it, so they run as the model wrote them).
FAST = ("sdpa", "flash_attention_2", "flash_attention_3", "flex_attention")


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


Attention = Callable[..., tuple[torch.Tensor, None]]
# Each parallelised model's attention, by its modules, held weakly (an entry goes with its model): transformers finds
# one function by name for the whole process, and a second model's install must not change the first's attention
# implementation (eager for a softcap, which sdpa cannot apply) nor its groups.
_BY_MODULE: weakref.WeakKeyDictionary[nn.Module, Attention] = weakref.WeakKeyDictionary()
_DISPATCH: dict[str, Attention] = {}


def _dispatch(name: str) -> Attention:
    """The function registered under `name`: the calling module's own model's attention."""
    def attention(module: nn.Module, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, None]:
        mine = _BY_MODULE.get(module)
        if mine is None:
            raise StrategyError(
                f"{type(module).__name__} calls the {name!r} attention, which parallelize() sets up for each model it "
                f"prepares, but this module was not in one (added afterwards, copied, or a config naming {name!r} "
                "by hand): parallelize the whole model once it is built")
        return mine(module, *args, **kwargs)

    return attention


def install(model: nn.Module, hcg: HybridGroup, *, name: str = ATTENTION,
            kernel: Callable[..., torch.Tensor] = sep_attention,
            own: Callable[..., torch.Tensor] = sep_own_attention, field: str = FIELD) -> None:
    """Register the sequence axis' attention with transformers under `name` and make the model use it: `kernel` (the
    Ulysses one, or cp's) where a layer is plain causal SDPA, else `own` running the model's own attention function
    with the layer's mask (sliding windows, chunks; softcapping, sinks)."""
    from transformers import AttentionInterface

    config: Any = model.config
    implementation: str = config._attn_implementation  # the function the model would call: its own from now on

    def attention(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                  attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                  is_causal: bool | None = None, **kwargs: Any) -> tuple[torch.Tensor, None]:
        # The model's mask is over this rank's positions only: each kernel applies the layer's over global ones. A mask
        # that carries gradients is a learned bias (Doge's dynamic mask), which no kernel here applies.
        if isinstance(attention_mask, torch.Tensor) and attention_mask.requires_grad:
            raise StrategyError(
                f"{field} > 1: {type(module).__name__} adds a learned term to its attention scores through its mask "
                f"(it carries gradients), which the attention over this rank's share of the rows cannot apply; set "
                f"{field.rpartition('.')[2]}: 1 for this model", field=field)
        layer = layer_attention(module, kwargs, is_causal)
        plain = layer.plain and key.shape[-1] == value.shape[-1] and kwargs.get("s_aux") is None \
            and not kwargs.get("softcap") and getattr(module, "sinks", None) is None  # (MLA's values are narrower)
        if plain and implementation in FAST:
            out = kernel(query, key, value, is_causal=True, scale=scaling, hcg=hcg)
            return out.transpose(1, 2).contiguous(), None
        function = own_function(module, implementation)
        out = own(module, query, key, value, layer, function, hcg=hcg, dropout=dropout, scaling=scaling, **kwargs)
        return out.contiguous(), None

    AttentionInterface.register(name, _DISPATCH.setdefault(name, _dispatch(name)))
    config = model.config
    config._attn_implementation = name
    for sub in model.modules():
        _BY_MODULE[sub] = attention
        config = getattr(sub, "config", None)  # sub-configs a model may carry (text_config, ...) follow
        if config is not None and hasattr(config, "_attn_implementation"):
            config._attn_implementation = name
