"""RowParallelLinear: the weight's input columns split across the mp group; partial outputs are summed.

Splitting W on dim 1 splits the contraction: each rank multiplies its block of input features, and an
all-reduce adds the partial products. The bias is replicated and added once, after the sum.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..topology.groups import HybridGroup
from . import collectives as comm
from .module import MpModule
from .sequence import ReduceScatterToSequence, mark_sequence_parallel
from .shards import divide, mark_sharded, shard_init_generator, shard_of

__all__ = ["RowParallelLinear"]


class RowParallelLinear(MpModule):
    """Linear layer whose weight columns (inputs) are split across the mp group.

    `weight` is this rank's block of columns `[out, in / mp]`; `bias` is full and added after the all-reduce.

    Args:
        input_is_parallel: the input is already split on its last dim (e.g. a ColumnParallelLinear with
            gather_output=False); otherwise each rank keeps its block of the full input, and the input's
            gradient is gathered back in backward.
        sequence_dim: under sequence parallelism, the output's sequence dimension: the partial sums are
            reduce-scattered along it (each rank gets its block of the sequence, summed) instead of
            all-reduced, and the bias, then added to this rank's tokens only, is marked sequence-parallel.
        hcg, device, dtype, init: as in ColumnParallelLinear.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        input_is_parallel: bool = False,
        sequence_dim: int = 0,
        hcg: HybridGroup | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        init: str = "full",
    ) -> None:
        super().__init__(hcg, init)
        self.in_features, self.out_features = in_features, out_features
        self.input_is_parallel, self.sequence_dim = input_is_parallel, sequence_dim
        local_in = divide(type(self).__name__, "in_features", in_features, self.mp_size)
        if init == "empty":
            weight = torch.empty(out_features, local_in, device=device, dtype=dtype)
            bias_t = torch.empty(out_features, device=device, dtype=dtype) if bias else None
        elif init == "full":
            full = nn.Linear(in_features, out_features, bias=bias, device=device, dtype=dtype)
            weight = shard_of(full.weight.detach(), 1, self.mp_rank, self.mp_size)
            bias_t = full.bias.detach().clone() if bias else None
        else:
            gen = shard_init_generator(device, self.mp_rank)
            bound = 1 / math.sqrt(in_features)  # fan_in is the full in_features, as in nn.Linear
            weight = torch.empty(out_features, local_in, device=device, dtype=dtype).uniform_(-bound, bound, generator=gen)
            # The bias is replicated: every rank draws it from the same stream so the copies agree.
            same = shard_init_generator(device, -1)
            bias_t = torch.empty(out_features, device=device, dtype=dtype).uniform_(-bound, bound, generator=same) if bias else None
        self.weight = mark_sharded(nn.Parameter(weight), 1)
        if bias_t is not None:
            self.bias = nn.Parameter(bias_t)
            if self.settings.sequence_parallel:
                mark_sequence_parallel([self.bias], hcg=hcg)
        else:
            self.register_parameter("bias", None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mp_size == 1:
            return F.linear(x, self.weight, self.bias)
        x_local = x if self.input_is_parallel else comm.scatter_to_mp(x, self.group)
        if self.settings.sequence_parallel:
            y = ReduceScatterToSequence.apply(F.linear(x_local, self.weight), self.sequence_dim, self.group, type(self).__name__)
        else:
            y = comm.reduce_from_mp(F.linear(x_local, self.weight), self.group, skip_copy=self.settings.skip_c_identity)
        return y + self.bias if self.bias is not None else y

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features} (local {self.weight.shape[1]}), out_features={self.out_features}, "
            f"input_is_parallel={self.input_is_parallel}, skip_c_identity={self.settings.skip_c_identity}, "
            f"sequence_parallel={self.settings.sequence_parallel} (dim {self.sequence_dim})"
        )
