"""Which modules are experts, and splitting them over the ep group.

An experts module is what transformers' MoE models hold (Qwen3-MoE's, Mixtral's and gpt-oss's `...Experts`, behind
`@use_experts_implementation`) and what a model of one's own may build the same way: 3-D parameters `gate_up_proj` and
`down_proj` with one row per expert (in whatever layout, biases beside them or not) and `forward(hidden_states,
top_k_index, top_k_weights)`, fed by a router the model runs itself. Splitting keeps ep rank r's contiguous block of
experts r·E/ep … (r+1)·E/ep − 1 (every parameter with a row per expert) and makes the module's forward the dispatching
one, which runs the module's own forward on the tokens its block receives: the experts' math (gpt-oss's clamped,
interleaved gate) stays the model's.
"""

from __future__ import annotations

import functools
import inspect

import torch
from torch import nn

from strategy import StrategyError

from ..topology.experts_mark import is_expert, mark_expert
from ..topology.groups import HybridGroup
from .dispatch import expert_parallel_forward

__all__ = ["FIELD", "INTERFACE", "experts_modules", "is_expert", "split_experts"]

FIELD = "hybrid_configs.ep_degree"
INTERFACE = ("3-D parameters gate_up_proj and down_proj [num_experts, ...] (transposed, biased or not) and "
             "forward(hidden_states, top_k_index, top_k_weights), as transformers' MoE experts")
def _weights(m: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    return getattr(m, "gate_up_proj"), getattr(m, "down_proj")


def experts_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The modules with the experts interface (their parameters 3-D and agreeing on the number of experts)."""
    found = []
    for name, m in model.named_modules():
        gate_up, down = getattr(m, "gate_up_proj", None), getattr(m, "down_proj", None)
        if isinstance(gate_up, nn.Parameter) and isinstance(down, nn.Parameter) and gate_up.dim() == down.dim() == 3:
            found.append((name, m))
    return found


def check_experts(model: nn.Module, hcg: HybridGroup) -> list[tuple[str, nn.Module]]:
    """Before anything changes: the model's experts split evenly over ep. StrategyError naming what to do."""
    found = experts_modules(model)
    if not found:
        raise StrategyError(
            f"{FIELD} {hcg.ep_size} splits experts, but {type(model).__name__} has no module parallelize recognises as "
            f"experts ({INTERFACE}); build its MoE layers that way, or set ep_degree: 1", field=FIELD)
    for name, m in found:
        gate_up, down = _weights(m)
        experts = gate_up.shape[0]
        if down.shape[0] != experts or len(inspect.signature(m.forward).parameters) < 3:
            raise StrategyError(f"{FIELD} {hcg.ep_size}: {type(model).__name__}'s experts {name} have gate_up_proj "
                                f"{tuple(gate_up.shape)} and down_proj {tuple(down.shape)} and forward"
                                f"{inspect.signature(m.forward)}, not the experts interface parallelize splits "
                                f"({INTERFACE}); set ep_degree: 1", field=FIELD)
        if experts % hcg.ep_size:
            raise StrategyError(f"{name} has {experts} experts, which ep_degree {hcg.ep_size} does not divide: each ep "
                                "rank holds an equal block of them; change ep_degree", field=FIELD)
    return found


def split_experts(modules: list[tuple[str, nn.Module]], hcg: HybridGroup) -> None:
    """Keep this ep rank's block of each module's experts (every parameter with one row per expert: the projections
    and their biases) and make its forward dispatch tokens over the ep group, its own forward running the block."""
    for _, m in modules:
        experts = int(_weights(m)[0].shape[0])
        block = experts // hcg.ep_size
        mine = slice(hcg.ep_rank * block, (hcg.ep_rank + 1) * block)
        for attr in [n for n, p in m.named_parameters(recurse=False) if p.dim() >= 1 and p.shape[0] == experts]:
            old = getattr(m, attr)
            new = nn.Parameter(old.detach()[mine].clone(), requires_grad=old.requires_grad)
            mark_expert(new, hcg.ep_size, hcg.ep_rank, experts)
            setattr(m, attr, new)
        if hasattr(m, "num_experts"):
            setattr(m, "num_experts", block)  # the local count, as transformers' own expert parallelism sets it
        own = m.forward  # (transformers' experts implementation switch included): runs this rank's block
        m.forward = functools.partial(expert_parallel_forward, m, hcg, own)
