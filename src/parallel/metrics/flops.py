"""The useful work of a step, counted for the whole model whatever the layout: 6 FLOPs per parameter a token flows
through (forward 2, backward 4), plus attention's 12 · layers · heads · head_dim · sequence per token (its two s × s
products, forward and backward, unmasked, as torchtitan and Megatron count it). Recompute is no useful work, so it is
not counted; experts count only as far as tokens use them (top-k of E).

The parameters are the whole model's, counted on every rank from its own share: a tensor-parallel shard counts for its
mp group, an FSDP2 shard is its whole tensor (a DTensor's numel is), an ep rank's block of experts for the ep group,
and the pipeline's stages are summed. A weight only looked up (an embedding) does no matmul and is not counted; an
LM head tied to it is, once.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ..tensor import VocabParallelEmbedding, is_sharded
from ..topology import HybridGroup
from ..topology.experts_mark import expert_block

__all__ = ["attention_shape", "flops_per_token", "matmul_parameters"]

_LOOKUPS: tuple[type, ...] = (nn.Embedding, nn.EmbeddingBag, VocabParallelEmbedding)


def matmul_parameters(model: nn.Module, hcg: HybridGroup) -> tuple[float, float]:
    """(dense, expert) parameters of the whole model that take part in a matmul, from this rank's share: one
    all-reduce over the pp group (a stage's weights are its own) when pp_degree > 1."""
    in_matmuls: dict[int, tuple[str, Any]] = {}
    for module_name, module in model.named_modules():
        if isinstance(module, _LOOKUPS):
            continue
        for name, p in module.named_parameters(recurse=False):
            in_matmuls.setdefault(id(p), (f"{module_name}.{name}", p))
    dense = expert = 0.0
    for name, p in in_matmuls.values():
        block = expert_block(p)
        if block is not None:
            expert += p.numel() * block[0]  # this ep rank's block, of ep_size blocks
        elif p.dim() == 3 or ".experts." in f".{name}":  # experts not split over ep (as the memory model tells them)
            expert += p.numel()
        else:
            dense += p.numel() * (hcg.mp_size if is_sharded(p) else 1)  # a DTensor's numel is its whole tensor's
    if hcg.pp_size > 1:
        counts = torch.tensor([dense, expert], dtype=torch.float64)
        dist.all_reduce(counts, group=hcg.pp_group)
        dense, expert = counts.tolist()
    return dense, expert


def _text_config(model: nn.Module) -> Any:
    """A Hugging Face model's (text) config, else None."""
    config: Any = getattr(model, "config", None)
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def attention_shape(model: nn.Module) -> tuple[int, int, int] | None:
    """(layers, heads, head_dim) from a Hugging Face model's config, else None."""
    config = _text_config(model)
    if config is None:
        return None
    try:
        layers, heads, hidden = int(config.num_hidden_layers), int(config.num_attention_heads), int(config.hidden_size)
    except (AttributeError, TypeError):
        return None
    return layers, heads, int(getattr(config, "head_dim", None) or hidden // heads)


def active_expert_fraction(model: nn.Module) -> float:
    """top_k / experts from a Hugging Face MoE config (1.0 when it names neither: every expert counted)."""
    config = _text_config(model)
    if config is None:
        return 1.0
    k = next((getattr(config, n) for n in ("num_experts_per_tok", "moe_k", "moe_topk", "top_k")
              if isinstance(getattr(config, n, None), int)), None)
    e = next((getattr(config, n) for n in ("num_local_experts", "num_experts", "moe_num_experts", "n_routed_experts")
              if isinstance(getattr(config, n, None), int)), None)
    return k / e if k and e else 1.0


def flops_per_token(model: nn.Module, hcg: HybridGroup, *, seq_len: int,
                    attention: tuple[int, int, int] | None = None) -> float:
    """Training FLOPs per token of the whole model (see the module's docstring). `attention`: (layers, heads,
    head_dim), read from a Hugging Face config when not given; without either, attention is not counted."""
    dense, expert = matmul_parameters(model, hcg)
    shape = attention or attention_shape(model)
    attn = 12.0 * shape[0] * shape[1] * shape[2] * seq_len if shape else 0.0
    return 6.0 * (dense + expert * active_expert_fraction(model)) + attn
