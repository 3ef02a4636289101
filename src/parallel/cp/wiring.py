"""How a model reaches `cp_attention`: Hugging Face models through transformers' AttentionInterface (as sep's
Ulysses kernel), a model of one's own by calling it, checked on its first forward."""

from __future__ import annotations

from torch import nn

from ..sep.hf import install
from ..sep.required import Requirement, require_attention
from ..topology.groups import HybridGroup
from .attention import CALLS, cp_attention
from .own_attention import cp_own_attention

__all__ = ["ATTENTION", "FIELD", "install_cp_attention", "require_cp_attention"]

ATTENTION = "parallel_cp"  # the name under which transformers finds it
FIELD = "hybrid_configs.cp_degree"
_CP = Requirement(FIELD, "cp_attention", CALLS, "two chunks of every row", "this rank's chunks")


def install_cp_attention(model: nn.Module, hcg: HybridGroup) -> None:
    """Register `cp_attention` with transformers and make the (Hugging Face) model use it."""
    install(model, hcg, name=ATTENTION, kernel=cp_attention, own=cp_own_attention, field=FIELD)


def require_cp_attention(model: nn.Module) -> None:
    """Make the first forward of `model` raise unless it called `cp_attention`."""
    require_attention(model, _CP)
