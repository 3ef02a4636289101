"""Expert parallelism, ep_degree > 1: each ep rank keeps a contiguous block of every MoE layer's experts; tokens go to
their experts' ranks and back by all-to-all; expert gradients are averaged over the ranks holding the same experts.

Builds on `topology`; `compose.parallelize` finds the experts (transformers' experts interface) and splits them.
"""

from .dispatch import expert_parallel_forward
from .interface import is_expert, split_experts

__all__ = ["expert_parallel_forward", "is_expert", "split_experts"]
