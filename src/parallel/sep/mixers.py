"""Which Hugging Face models the sequence axes can split: each layer's token mixing must be attention, the one mixer
sep and cp carry across ranks. A recurrence (Mamba, linear attention, gated delta-nets) or a convolution over the
sequence would run over the positions one rank holds, so such a model is refused under sep and cp, by name; so is
attention that numbers positions from the length of its input (Llama 4's temperature tuning)."""

from __future__ import annotations

import re
from typing import Any

from torch import nn

from strategy import StrategyError

from .layer_attention import ATTENTION_TYPES

__all__ = ["check_token_mixers"]

PER_TOKEN_TYPES = ("mlp", "moe")  # layer types that mix no tokens at all
# Class names of token mixers that are not attention (transformers' Mamba, Mamba 2, gated delta-net, lightning and
# other linear attentions, short convolutions, RWKV).
_RECURRENT = re.compile(r"mamba|deltanet|lightning|linearattention|shortconv|rwkv|recurren", re.IGNORECASE)


def check_token_mixers(model: nn.Module, field: str) -> None:
    """Raise StrategyError, before anything changes, when `model` mixes tokens otherwise than by attention."""
    config: Any = getattr(model, "config", None)
    if config is None:
        return
    name, degree = type(model).__name__, field.rpartition(".")[2]
    types = list(dict.fromkeys(getattr(config, "layer_types", None) or ()))
    other = [t for t in types if t not in ATTENTION_TYPES + PER_TOKEN_TYPES]
    mixers = [(n, type(m).__name__) for n, m in model.named_modules()
              if n and (isinstance(m, nn.Conv1d) or _RECURRENT.search(type(m).__name__))]
    if getattr(config, "attn_temperature_tuning", False):
        raise StrategyError(
            f"{field} > 1 gives each rank a share of every row, but {name}'s attention temperature tuning "
            "(config.attn_temperature_tuning, on its layers without rotary embeddings) scales queries by their "
            "position counted from the start of the tensor it is given, which is this rank's share; set "
            f"config.attn_temperature_tuning = False (on one process too), or {degree}: 1", field=field)
    if not other and not mixers:
        return
    what = f"layers of type {', '.join(map(repr, other))} (config.layer_types)" if other else \
        f"{mixers[0][1]} ({mixers[0][0]})"
    raise StrategyError(
        f"{field} > 1 gives each rank a share of every row, but {name} mixes tokens with {what}, which would run over "
        "this rank's positions only: sep and cp carry attention across ranks, not recurrences or convolutions over "
        f"the sequence; set {degree}: 1 for this model (mp, pp, sharding and dp split it without cutting rows)",
        field=field)
