"""`broadcast_data`: every rank of an mp group trains on the batch its first rank loaded (MpConfig.need_broadcast_data).

Tensor parallelism needs identical inputs on the ranks of one mp group; a data loader with its own shuffling
per rank silently breaks that. Shapes and dtypes travel first, so the other ranks need not know them.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from ..topology.groups import HybridGroup, current
from ..topology.guard import guard

__all__ = ["broadcast_data"]

# dtypes by code, for the metadata tensor; the same list on every rank.
_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
           torch.int8, torch.uint8, torch.bool)
_CODES = {dtype: code for code, dtype in enumerate(_DTYPES)}
_FAILED = -1  # the metadata rank 0 sends when it cannot send the batch


def broadcast_data(*tensors: Any, hcg: HybridGroup | None = None) -> tuple[Any, ...]:
    """The tensors of the mp group's first rank, on every rank of the group, when the resolved
    `need_broadcast_data` is on; the arguments unchanged when it is off (or mp_degree is 1).

    Other ranks may pass placeholders of any shape (`torch.empty(0)`): shapes and dtypes come from the first
    rank. Arguments that are not tensors are returned as they are, on every rank. The result is on each
    argument's device.

    Example::

        ids, labels = loader_batch() if hcg.mp_rank == 0 else (torch.empty(0), torch.empty(0))
        ids, labels = parallel.broadcast_data(ids, labels)
    """
    hcg = hcg or current()
    if not hcg.resolved.mp.need_broadcast_data or hcg.mp_size == 1:
        return tensors
    positions = [i for i, t in enumerate(tensors) if isinstance(t, torch.Tensor)]
    device = tensors[positions[0]].device if positions else torch.device("cpu")
    sent, problem = None, None
    if hcg.mp_rank == 0:
        try:
            sent = _metadata([tensors[i] for i in positions], device)
        except TypeError as e:  # still join the exchange, so the other ranks fail too instead of waiting
            sent, problem = torch.tensor([_FAILED], dtype=torch.int64, device=device), e
    layout = _broadcast_metadata(sent, len(positions), hcg, device)
    if problem is not None:
        raise problem
    out = list(tensors)
    for i, (dtype, shape) in zip(positions, layout):
        mine = tensors[i]
        buffer = mine.contiguous() if hcg.mp_rank == 0 else torch.empty(shape, dtype=dtype, device=mine.device)
        with guard("broadcast_data", hcg.mp_group):
            dist.broadcast(buffer, group=hcg.mp_group, group_src=0)
        out[i] = buffer
    return tuple(out)


def _metadata(tensors: list[torch.Tensor], device: torch.device) -> torch.Tensor:
    """[ndim, dtype code, *shape] per tensor, concatenated."""
    values: list[int] = []
    for t in tensors:
        if t.dtype not in _CODES:
            raise TypeError(f"broadcast_data cannot send {t.dtype} tensors; supported: {', '.join(map(str, _DTYPES))}")
        values += [t.dim(), _CODES[t.dtype], *t.shape]
    return torch.tensor(values, dtype=torch.int64, device=device)


def _broadcast_metadata(meta: torch.Tensor | None, count: int, hcg: HybridGroup,
                        device: torch.device) -> list[tuple[torch.dtype, tuple[int, ...]]]:
    length = torch.tensor([0 if meta is None else meta.numel()], dtype=torch.int64, device=device)
    with guard("broadcast_data (shapes)", hcg.mp_group):
        dist.broadcast(length, group=hcg.mp_group, group_src=0)
        if meta is None:
            meta = torch.empty(int(length), dtype=torch.int64, device=device)
        dist.broadcast(meta, group=hcg.mp_group, group_src=0)
    values, out, k = meta.tolist(), [], 0
    if values == [_FAILED]:
        if hcg.mp_rank == 0:
            return []
        raise ValueError("broadcast_data: the mp group's first rank could not send its batch (see its error)")
    while k < len(values):
        ndim, code = values[k], values[k + 1]
        out.append((_DTYPES[code], tuple(values[k + 2 : k + 2 + ndim])))
        k += 2 + ndim
    if len(out) != count:
        raise ValueError(f"broadcast_data: the mp group's first rank sent {len(out)} tensors, this rank passed {count}; "
                         "pass the same arguments on every rank")
    return out
