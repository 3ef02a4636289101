"""VocabParallelEmbedding: the rows of the table split across the mp group.

Each rank looks up the ids that fall in its block of rows, writes zeros for the rest, and an all-reduce
sums the blocks: exactly one rank contributes each id's row.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..topology.groups import HybridGroup
from . import collectives as comm
from .module import MpModule
from .sequence import ReduceScatterToSequence
from .shards import divide, mark_sharded, shard_init_generator, shard_of

__all__ = ["VocabParallelEmbedding"]


class VocabParallelEmbedding(MpModule):
    """Embedding table split by rows (vocabulary) across the mp group.

    `weight` is this rank's block `[num_embeddings / mp, embedding_dim]`, rows
    `[mp_rank * V / mp, (mp_rank + 1) * V / mp)`. `init="full"` matches nn.Embedding's slices for the same
    seed; `init="shard"` draws only the shard. Under sequence parallelism the output is reduce-scattered
    along `sequence_dim` (each rank gets its block of the sequence) instead of all-reduced: it enters the
    sequence-parallel region directly.

    `padding_idx`, as nn.Embedding's: the lookup gives that row no gradient (on the rank whose block holds it); a
    head tied to the table still does, as in one process.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        *,
        sequence_dim: int = 0,
        hcg: HybridGroup | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        init: str = "full",
        padding_idx: int | None = None,
    ) -> None:
        super().__init__(hcg, init)
        self.num_embeddings, self.embedding_dim, self.sequence_dim = num_embeddings, embedding_dim, sequence_dim
        local = divide(type(self).__name__, "num_embeddings", num_embeddings, self.mp_size)
        self.vocab_start, self.vocab_end = self.mp_rank * local, (self.mp_rank + 1) * local
        self.padding_idx = None if padding_idx is None else padding_idx % num_embeddings
        pad = self.padding_idx
        held = pad is not None and self.vocab_start <= pad < self.vocab_end
        self._local_padding = None if pad is None or not held else pad - self.vocab_start  # this block's row of it
        if init == "empty":
            weight = torch.empty(local, embedding_dim, device=device, dtype=dtype)
        elif init == "full":
            full = nn.Embedding(num_embeddings, embedding_dim, self.padding_idx, device=device, dtype=dtype)
            weight = shard_of(full.weight.detach(), 0, self.mp_rank, self.mp_size)
        else:
            gen = shard_init_generator(device, self.mp_rank)
            weight = torch.empty(local, embedding_dim, device=device, dtype=dtype).normal_(generator=gen)
            if self._local_padding is not None:
                weight[self._local_padding] = 0  # as nn.Embedding initialises it
        self.weight = mark_sharded(nn.Parameter(weight), 0)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if self.mp_size == 1:
            return F.embedding(ids, self.weight, self.padding_idx)
        outside = (ids < self.vocab_start) | (ids >= self.vocab_end)
        local_ids = (ids - self.vocab_start).masked_fill(outside, 0)
        # F.embedding's padding_idx zeroes that row's gradient in this lookup only: another use of the weight (a tied
        # head) still gives it one.
        out = F.embedding(local_ids, self.weight, self._local_padding).masked_fill(outside.unsqueeze(-1), 0.0)
        if self.settings.sequence_parallel:
            return ReduceScatterToSequence.apply(out, self.sequence_dim, self.group, type(self).__name__)
        return comm.reduce_from_mp(out, self.group)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings} (local rows {self.vocab_start}..{self.vocab_end}), {self.embedding_dim}"
