"""Hybrid-parallel runtime on torch.distributed, driven by a resolved strategy.

`init(strategy)` builds the groups of every hybrid axis and one DeviceMesh over them; the layers and the
optimizer wrapper read their settings from the group it makes current (or the `hcg=` they are given).

Layout (each subpackage imports only those above it):
    topology/    groups, mesh, agreement across ranks, guarded collectives
    tensor/      mp collectives, parallel layers, sequence parallelism
    sharding/    ZeRO stages 1-3 on FSDP2 over the sharding axis
    pipeline/    pipeline stages and schedules on torch.distributed.pipelining over the pp axis
    sep/         sequence split over the sep (or cp) axis, Ulysses all-to-all attention
    cp/          context parallelism: load-balanced chunks, attention over all-gathered keys and values
    experts/     expert parallelism: each ep rank's block of experts, tokens dispatched by all-to-all
    training/    optimizer wrapper, amp, clipping, gradient merge, recompute, replica checks
    checkpoint/  DCP save / load / reshard, periodic checkpoints and auto-resume, the `strategy checkpoint` command
    compose/     `parallelize`: a user's model, parallelised in one fixed order
    metrics/     `Meter`: step time, phases, tokens/s, MFU, memory and stragglers per rank
"""

from .checkpoint import Checkpoint, Checkpointer, full_state_dict, import_paddle, load, save
from .compose import parallelize
from .pipeline import PipelineModel
from .sep import sep_attention, sequence_positions, split_sequence
from .cp import cp_attention
from .sharding import apply_sharding
from .tensor import (
    ColumnParallelLinear,
    ParallelCrossEntropy,
    RowParallelLinear,
    VocabParallelEmbedding,
    add_main_grad,
    broadcast_data,
    gather_from_sequence,
    is_sharded,
    mark_sequence_parallel,
    model_parallel_rng,
    reduce_sequence_parallel_grads,
    scatter_to_sequence,
)
from .topology import CollectiveError, HybridGroup, communicator_options, current, destroy, init
from .metrics import Meter
from .training import ReplicaMismatchError, HybridParallelOptimizer, apply_recompute, autocast, cast_for_amp, check_replicas

__all__ = [
    "Checkpoint",
    "Checkpointer",
    "CollectiveError",
    "ColumnParallelLinear",
    "HybridGroup",
    "HybridParallelOptimizer",
    "Meter",
    "ParallelCrossEntropy",
    "PipelineModel",
    "ReplicaMismatchError",
    "RowParallelLinear",
    "VocabParallelEmbedding",
    "add_main_grad",
    "apply_sharding",
    "apply_recompute",
    "autocast",
    "broadcast_data",
    "cast_for_amp",
    "check_replicas",
    "communicator_options",
    "cp_attention",
    "current",
    "destroy",
    "full_state_dict",
    "gather_from_sequence",
    "import_paddle",
    "init",
    "is_sharded",
    "load",
    "mark_sequence_parallel",
    "model_parallel_rng",
    "parallelize",
    "reduce_sequence_parallel_grads",
    "save",
    "scatter_to_sequence",
    "sep_attention",
    "sequence_positions",
    "split_sequence",
]
