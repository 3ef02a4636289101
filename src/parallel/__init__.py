"""Tensor-parallel runtime on torch.distributed, driven by a resolved strategy.

`init(strategy)` builds the dp × mp process groups; the layers and the optimizer wrapper read their
settings from the group it makes current (or the `hcg=` they are given).
"""

from .amp import autocast, cast_for_amp
from .checkpoint import Checkpoint, full_state_dict, load, save
from .column import ColumnParallelLinear
from .comm import CollectiveError
from .cross_entropy import ParallelCrossEntropy
from .data import broadcast_data
from .embedding import VocabParallelEmbedding
from .groups import HybridGroup, communicator_options, current, destroy, init
from .optimizer import HybridParallelOptimizer, add_main_grad
from .parallelize import parallelize
from .replicas import ReplicaMismatchError, check_replicas
from .recompute import apply_recompute
from .row import RowParallelLinear
from .sequence import gather_from_sequence, mark_sequence_parallel, reduce_sequence_parallel_grads, scatter_to_sequence
from .sharding import is_sharded

__all__ = [
    "Checkpoint",
    "CollectiveError",
    "ColumnParallelLinear",
    "HybridGroup",
    "HybridParallelOptimizer",
    "ParallelCrossEntropy",
    "ReplicaMismatchError",
    "RowParallelLinear",
    "VocabParallelEmbedding",
    "add_main_grad",
    "apply_recompute",
    "autocast",
    "broadcast_data",
    "cast_for_amp",
    "check_replicas",
    "communicator_options",
    "current",
    "destroy",
    "full_state_dict",
    "gather_from_sequence",
    "init",
    "is_sharded",
    "load",
    "mark_sequence_parallel",
    "parallelize",
    "reduce_sequence_parallel_grads",
    "save",
    "scatter_to_sequence",
]
