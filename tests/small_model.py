"""A small model and its tensor-parallel twin, built in the same order from the same draws: the tensor layers' tests
and the training options' (clipping, sync, amp) compare the two."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import parallel

V, H, FF, SEQ, BATCH, STEPS = 16, 8, 16, 5, 8, 5


class Reference(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb, self.up, self.down = nn.Embedding(V, H), nn.Linear(H, FF), nn.Linear(FF, H)
        self.norm, self.head = nn.LayerNorm(H), nn.Linear(H, V)

    def forward(self, ids, target):
        h = self.emb(ids)
        h = self.norm(h + self.down(F.gelu(self.up(h))))
        return F.cross_entropy(self.head(h).reshape(-1, V), target.reshape(-1))


class Parallel(nn.Module):
    """The same model with its big matrices split across the mp group (same init order, same RNG draws)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = parallel.VocabParallelEmbedding(V, H)
        self.up = parallel.ColumnParallelLinear(H, FF, gather_output=False)
        self.down = parallel.RowParallelLinear(FF, H, input_is_parallel=True)
        self.norm = nn.LayerNorm(H)
        self.head = parallel.ColumnParallelLinear(H, V, gather_output=False)
        self.loss = parallel.ParallelCrossEntropy()

    def forward(self, ids, target):
        h = self.emb(ids)
        h = self.norm(h + self.down(F.gelu(self.up(h))))
        return self.loss(self.head(h), target)


SHARD_DIMS = {"emb.weight": 0, "up.weight": 0, "up.bias": 0, "down.weight": 1, "head.weight": 0, "head.bias": 0}


def twins() -> tuple[Reference, Parallel]:
    """The one-process model and its tensor-parallel twin, each built from seed 0: the same weights, split."""
    torch.manual_seed(0)
    reference = Reference()
    torch.manual_seed(0)
    return reference, Parallel()
