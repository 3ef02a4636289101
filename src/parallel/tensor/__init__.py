"""Tensor (model) parallelism over the mp group: the region collectives, the parallel layers, sequence parallelism.

Builds on `topology` only.
"""

from .column import ColumnParallelLinear
from .cross_entropy import ParallelCrossEntropy
from .data import broadcast_data
from .embedding import VocabParallelEmbedding
from .grads import add_main_grad
from .random import model_parallel_rng
from .row import RowParallelLinear
from .sequence import gather_from_sequence, mark_sequence_parallel, reduce_sequence_parallel_grads, scatter_to_sequence
from .shards import is_sharded

__all__ = ["ColumnParallelLinear", "ParallelCrossEntropy", "RowParallelLinear", "VocabParallelEmbedding", "add_main_grad",
           "broadcast_data", "model_parallel_rng", "gather_from_sequence", "is_sharded", "mark_sequence_parallel",
           "reduce_sequence_parallel_grads", "scatter_to_sequence"]
