"""`split_sequence`: one data rank's batch cut into this sep rank's contiguous chunk of every row.

Targets are shifted before the cut, so the token at a chunk's end still has its target (the next chunk's first
token), and the loss is normalised by the whole batch's target count: the sep group's loss shares sum to the data
rank's mean token loss. Every sep rank holds the whole batch, so no collective is needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from strategy import StrategyError

from ..topology.groups import HybridGroup, current

__all__ = ["IGNORE_INDEX", "split_sequence"]

IGNORE_INDEX = -100  # Hugging Face's (and torch's cross_entropy default) "no target here"


def split_sequence(batch: Mapping[str, torch.Tensor], *, hcg: HybridGroup | None = None) -> dict[str, Any]:
    """This sep rank's slice of `batch` ({"input_ids", optional "labels"}, rows × tokens), ready for a Hugging Face
    causal LM's `forward(**slice)`: `input_ids`, `labels` (this rank's chunk of every row), `position_ids` (the
    chunk's global positions), `shift_labels` (each token's next-token target, -100 at a row's end) and
    `num_items_in_batch` (the targets in the whole batch). Without labels, the input ids are the labels. At
    sep_degree 1 the whole batch, with the same keys.

    Raises:
        StrategyError: the rows' length is not divisible by sep_degree (naming both).

    Example::

        loss = model(**parallel.split_sequence({"input_ids": ids})).loss   # this rank's share
    """
    hcg = hcg or current()
    ids = batch["input_ids"]
    labels = batch.get("labels", ids)
    length, parts = ids.shape[-1], hcg.sep_size
    if length % parts:
        raise StrategyError(f"the rows are {length} tokens long, which hybrid_configs.sep_degree {parts} does not divide; "
                            f"make the length a multiple of {parts}", field="hybrid_configs.sep_degree")
    shifted = torch.cat([labels[..., 1:], torch.full_like(labels[..., :1], IGNORE_INDEX)], dim=-1)
    size = length // parts
    mine = slice(hcg.sep_rank * size, (hcg.sep_rank + 1) * size)
    positions = torch.arange(mine.start, mine.stop, device=ids.device).expand(*ids.shape[:-1], size)
    return {"input_ids": ids[..., mine], "labels": labels[..., mine], "position_ids": positions,
            "shift_labels": shifted[..., mine].contiguous(),
            "num_items_in_batch": (shifted != IGNORE_INDEX).sum()}
