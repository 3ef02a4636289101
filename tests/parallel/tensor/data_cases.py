"""Rank-side cases for parallel.broadcast_data."""

from __future__ import annotations

import torch
import torch.distributed as dist

import parallel
from rank_helpers import count_collectives, init, make_strategy


def broadcast(dp: int, mp: int, need_broadcast_data: bool) -> dict:
    hcg = init(make_strategy(mp, dp=dp, need_broadcast_data=need_broadcast_data))
    rank = dist.get_rank()
    if hcg.mp_rank == 0:  # each mp group's first rank loads a batch of its own
        ids = torch.arange(15).view(3, 5) + 100 * rank
        mask = torch.full((2,), float(rank), dtype=torch.bfloat16)
    else:
        ids, mask = torch.empty(0, dtype=torch.long), torch.empty(0)
    with count_collectives() as counts:
        got_ids, label, got_mask = parallel.broadcast_data(ids, "label", mask)
    return {
        "ids": got_ids.tolist(), "label": label, "mask": got_mask.float().tolist(), "dtype": str(got_mask.dtype),
        "unchanged": got_ids is ids and got_mask is mask, "collectives": dict(counts),
    }
