"""Ulysses attention over the sep group: all-to-all sequence chunks for head groups, attend, all-to-all back.

Each sep rank holds a contiguous chunk of the sequence for every head. The all-to-all gives each rank the whole
sequence for heads / sep of them; attention over a full sequence needs nothing else, and a second all-to-all
returns each rank its chunk for every head. Both are torch's autograd all-to-all: the backward is the reverse
exchange. Key/value heads fewer than sep_degree are repeated so every rank gets whole groups.
"""

from __future__ import annotations

import contextvars

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed._functional_collectives import all_to_all_single_autograd, wait_tensor

from ..topology.groups import HybridGroup, current

__all__ = ["CALLS", "heads_to_sequence", "record_call", "repeat_kv_for", "sep_attention", "sequence_to_heads"]

# A forward that must attend through sep_attention sets a list here; each call appends to it (sep.required's check).
CALLS: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("sep_attention_calls", default=None)


def record_call(calls: contextvars.ContextVar[list[int] | None], parts: int, q: torch.Tensor, k: torch.Tensor) -> None:
    """Count the call for a first-forward check that is listening (`sep.required`); key/value heads must divide the
    query heads."""
    listening = calls.get()
    if listening is not None:
        listening.append(parts)
    if q.shape[1] % k.shape[1]:
        raise ValueError(f"key/value heads ({k.shape[1]}) must divide the query heads ({q.shape[1]})")


def _exchange(send: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    """Equal slices of dim 0 to each rank, theirs back: torch's autograd all-to-all (the backward is the reverse)."""
    return wait_tensor(all_to_all_single_autograd(send, None, None, group))


def sequence_to_heads(x: torch.Tensor, group: dist.ProcessGroup, parts: int) -> torch.Tensor:
    """[b, heads, chunk, d] on each rank -> [b, heads / parts, chunk · parts, d]: rank j's head group, whole sequence."""
    b, h, s, d = x.shape
    # Rank j receives head group j: lay the groups out along dim 0, which all_to_all_single splits evenly.
    send = x.reshape(b, parts, h // parts, s, d).transpose(0, 1).contiguous()
    recv = _exchange(send, group)  # recv[i]: rank i's chunk of my heads
    return recv.permute(1, 2, 0, 3, 4).reshape(b, h // parts, parts * s, d)


def heads_to_sequence(y: torch.Tensor, group: dist.ProcessGroup, parts: int) -> torch.Tensor:
    """The inverse: [b, heads / parts, sequence, d] -> [b, heads, sequence / parts, d]."""
    b, h, s, d = y.shape
    send = y.reshape(b, h, parts, s // parts, d).permute(2, 0, 1, 3, 4).contiguous()  # send[j]: rank j's chunk
    recv = _exchange(send, group)  # recv[i]: head group i of my chunk
    return recv.transpose(0, 1).reshape(b, parts * h, s // parts, d)


def repeat_kv_for(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, parts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """k and v with heads that split into `parts` whole groups beside q's: each key/value head repeated when they are
    too few (or unevenly many). ValueError when the query heads do not split."""
    heads, kv_heads = q.shape[1], k.shape[1]
    if heads % parts:
        raise ValueError(f"{heads} query heads are not divisible by sep_degree {parts}: each sep rank attends over "
                         "heads / sep_degree of them")
    if kv_heads % parts:
        repeat = (parts // kv_heads) if parts % kv_heads == 0 else heads // kv_heads
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
    return k, v


def sep_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, is_causal: bool = True,
                  scale: float | None = None, hcg: HybridGroup | None = None) -> torch.Tensor:
    """`F.scaled_dot_product_attention` over the whole sequence, for this rank's chunk of it.

    Args:
        q, k, v: `[batch, heads, chunk, head_dim]`, this sep rank's contiguous chunk of the sequence; k and v may
            have fewer heads (grouped-query attention), a divisor of q's.
        is_causal, scale: as SDPA's, over global positions (chunks are in rank order).

    Returns:
        `[batch, heads, chunk, head_dim]`, this rank's chunk of the attention output. At sep_degree 1, plain SDPA.

    Example::

        y = parallel.sep_attention(q, k, v)        # q, k, v: this rank's quarter of the sequence at sep 4
    """
    hcg = hcg or current()
    parts = hcg.sep_size
    record_call(CALLS, parts, q, k)
    heads, kv_heads = q.shape[1], k.shape[1]
    if parts == 1:
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale,
                                              enable_gqa=kv_heads != heads)
    k, v = repeat_kv_for(q, k, v, parts)
    group = hcg.sep_group
    q, k, v = (sequence_to_heads(t, group, parts) for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale, enable_gqa=k.shape[1] != q.shape[1])
    return heads_to_sequence(out, group, parts)
