"""`split_sequence`: one data rank's batch cut into this rank's share of every row, under sep or cp.

sep gives rank r the r-th of sep_degree contiguous chunks; cp cuts a row into 2·cp_degree chunks and gives rank r
chunks r and 2·cp_degree − 1 − r, so that under a causal mask every cp rank attends over as many key positions (the
load balance of Megatron-core and torchtitan). Targets are shifted before the cut, so the token at a chunk's end
still has its target (the next chunk's first token), and the loss is normalised by the whole batch's target count:
the group's loss shares sum to the data rank's mean token loss. Every rank of the group holds the whole batch, so no
collective is needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from strategy import StrategyError

from ..topology.groups import HybridGroup, current

__all__ = ["IGNORE_INDEX", "sequence_positions", "split_sequence"]

IGNORE_INDEX = -100  # Hugging Face's (and torch's cross_entropy default) "no target here"


def sequence_positions(length: int, hcg: HybridGroup, device: torch.device | None = None) -> torch.Tensor:
    """The positions of a row of `length` tokens this rank holds, in the order it holds them: its sep chunk, or its
    two cp chunks (the whole row when neither axis splits it).

    Raises:
        StrategyError: sep_degree (or 2 × cp_degree) does not divide the length, naming both.
    """
    if hcg.cp_size > 1:
        parts, field, degree = 2 * hcg.cp_size, "hybrid_configs.cp_degree", hcg.cp_size
        chunks: tuple[int, ...] = (hcg.cp_rank, parts - 1 - hcg.cp_rank)
        cut = f"cut into 2 × cp_degree = {parts} equal chunks (cp rank r holds chunks r and {parts - 1} − r)"
    else:
        parts, field, degree = hcg.sep_size, "hybrid_configs.sep_degree", hcg.sep_size
        chunks, cut = (hcg.sep_rank,), "divide"
    if length % parts:
        raise StrategyError(f"the rows are {length} tokens long, which {field} {degree} does not {cut}; make "
                            f"the length a multiple of {parts}", field=field)
    size = length // parts
    return torch.cat([torch.arange(c * size, (c + 1) * size, device=device) for c in chunks])


def split_sequence(batch: Mapping[str, torch.Tensor], *, hcg: HybridGroup | None = None) -> dict[str, Any]:
    """This rank's slice of `batch` ({"input_ids", optional "labels"}, rows × tokens), ready for a Hugging Face
    causal LM's `forward(**slice)`: `input_ids`, `labels` (this rank's share of every row: its sep chunk, or its two
    cp chunks r and 2·cp_degree − 1 − r), `position_ids` (their global positions), `shift_labels` (each token's
    next-token target, -100 at a row's end) and `num_items_in_batch` (the targets in the whole batch). Without
    labels, the input ids are the labels. At sep_degree and cp_degree 1 the whole batch, with the same keys.

    Raises:
        StrategyError: the rows' length is not divisible by sep_degree (or 2 × cp_degree), naming both.

    Example::

        loss = model(**parallel.split_sequence({"input_ids": ids})).loss   # this rank's share
    """
    hcg = hcg or current()
    ids = batch["input_ids"]
    labels = batch.get("labels", ids)
    mine = sequence_positions(ids.shape[-1], hcg, ids.device)
    shifted = torch.cat([labels[..., 1:], torch.full_like(labels[..., :1], IGNORE_INDEX)], dim=-1)
    return {"input_ids": ids[..., mine], "labels": labels[..., mine],
            "position_ids": mine.expand(*ids.shape[:-1], mine.numel()),
            "shift_labels": shifted[..., mine].contiguous(),
            "num_items_in_batch": (shifted != IGNORE_INDEX).sum()}
