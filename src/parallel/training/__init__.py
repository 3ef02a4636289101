"""The training loop's side of the strategy: the optimizer wrapper, amp, clipping, gradient merge, recompute, replica checks.

Builds on `topology` and `tensor`.
"""

from .amp import autocast, cast_for_amp
from .optimizer import HybridParallelOptimizer
from .recompute import apply_recompute
from .replicas import ReplicaMismatchError, check_replicas

__all__ = ["HybridParallelOptimizer", "ReplicaMismatchError", "apply_recompute", "autocast", "cast_for_amp",
           "check_replicas"]
