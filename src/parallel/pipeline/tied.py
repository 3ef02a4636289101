"""A weight tied across pipeline stages (an LM head sharing the embedding's): each end's rank holds a copy, and the two
copies are kept one weight, as Megatron-core's embedding group and Paddle's SharedLayerDesc keep them.

The first stage's rank holds it under the embedding's name, the last stage's under the head's. The copies start equal
(the first stage's values, broadcast over the embedding group when the model is cut); each optimizer update sums their
gradients over that group (HybridParallelOptimizer, before the dp average and the clip), so both take the same step.
Clipping counts the first copy only, checkpoints store it once under the first name, and replica checks compare the
copies. Where one rank holds both ends (DualPipeV's V puts stage 0 and the last stage on pp rank 0) the two uses stay
one Parameter and nothing is exchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch import nn

from ..topology.coalesced import all_reduce_coalesced
from ..topology.groups import HybridGroup
from ..topology.guard import guard
from ..topology.tied_mark import is_tied_copy, mark_tied

__all__ = ["sum_tied_grads", "tie_across_stages"]


@torch.no_grad()
def tie_across_stages(model: nn.Module, tied: tuple[tuple[str, str], ...], hcg: HybridGroup, *, first: bool) -> None:
    """Mark this rank's copy of each tied weight (`tied`: (first stage's name, last stage's name) pairs) and make it
    the first stage's values. `model` is pruned to this rank's stages, which hold one end (`first`) but not both."""
    if not tied:
        return
    group = hcg.embedding_group
    assert group is not None, "a rank holding one end of the pipeline is in an embedding group"
    copies = []
    for key, name in tied:
        p = model.get_parameter(key if first else name)
        mark_tied(p, key=key, primary=first)
        copies.append(p.detach())
    src = dist.get_group_rank(group, hcg.embedding_ranks[0])
    with guard("tied weight broadcast from the first stage", group):
        for t in copies:
            dist.broadcast(t, group=group, group_src=src)


def sum_tied_grads(grads: Sequence[tuple[torch.Tensor, torch.Tensor]], hcg: HybridGroup) -> None:
    """Each tied copy's gradient, in place: the sum of both copies' (each end's use of the weight), one all-reduce."""
    chosen = [g for p, g in grads if is_tied_copy(p)]
    if chosen and hcg.embedding_group is not None:
        all_reduce_coalesced(chosen, hcg.embedding_group, average=False)
