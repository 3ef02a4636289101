"""Context-parallel attention: this rank's two chunks of queries over the whole sequence's keys and values.

Under cp each rank holds chunks r and 2·cp − 1 − r of every row (of 2·cp equal chunks: `split_sequence`), every
head. Attention needs every key position before a query, so the keys and values of the cp group are all-gathered
(torch's functional `all_gather_single_autograd`: the backward reduce-scatters their gradients back to the rank
that holds them), put back in sequence order, and each query chunk attends over the prefix that ends with it, the
causal mask aligned to its lower right: exactly the rows of the one-process attention matrix this rank owns.

Why all-gather and not torch's ring (`torch.distributed.tensor.experimental.context_parallel`): torch 2.13's ring
dispatches only CUDA's flash, efficient and cuDNN SDPA kernels on DTensor-sharded buffers (CPU SDPA has no rule),
and takes over the module's whole forward; this is a drop-in for `F.scaled_dot_product_attention` on plain tensors,
grouped-query included, that runs on every device. The volume is the ring's (each rank receives the other ranks'
keys and values once per layer), sent as one collective instead of cp − 1 overlapped steps; Llama 3's context
parallelism does the same (Dubey et al., 2024, §3.3.2). The load balance makes every rank attend over the same number
of key positions: (r + 1) + (2·cp − r) chunks.
"""

from __future__ import annotations

import contextvars
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed._functional_collectives import all_gather_single_autograd, wait_tensor
from torch.nn.attention.bias import causal_lower_right

from ..sep.attention import record_call
from ..topology.groups import HybridGroup, current

__all__ = ["CALLS", "cp_attention", "cpu_prefix_attention", "gather_sequence", "lower_right_attention",
           "masked_prefix_attention", "prefix_attention"]

# A forward that must attend through cp_attention sets a list here; each call appends to it (the first-forward check).
CALLS: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("cp_attention_calls", default=None)


def gather_sequence(k: torch.Tensor, v: torch.Tensor, group: dist.ProcessGroup, parts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every cp rank's keys and values `[b, heads, 2·chunk, d]` (chunks r and 2·parts − 1 − r) -> the whole
    sequence `[b, heads, 2·parts·chunk, d]` in order, with an autograd all-gather (one for both)."""
    if k.shape != v.shape:  # (multi-head latent attention: values narrower than keys) one gather each
        return _in_order(k, group, parts), _in_order(v, group, parts)
    both = _in_order(torch.stack([k, v]).flatten(0, 1), group, parts).unflatten(0, (2, k.shape[0]))
    return both[0], both[1]


def _in_order(x: torch.Tensor, group: dist.ProcessGroup, parts: int) -> torch.Tensor:
    """Every cp rank's `[b, heads, 2·chunk, d]` (chunks r and 2·parts − 1 − r) -> the whole sequence in order."""
    b, h, two_chunks, d = x.shape
    chunk = two_chunks // 2
    gathered = wait_tensor(all_gather_single_autograd(x.contiguous(), 0, group))  # rank after rank on dim 0
    g = gathered.view(parts, b, h, 2, chunk, d)
    # Chunk c < parts is rank c's first; chunk c >= parts is rank (2·parts − 1 − c)'s second.
    first = g[:, :, :, 0].permute(1, 2, 0, 3, 4).reshape(b, h, parts * chunk, d)
    second = g.flip(0)[:, :, :, 1].permute(1, 2, 0, 3, 4).reshape(b, h, parts * chunk, d)
    return torch.cat([first, second], dim=2)


_FLASH_CPU = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
_FLASH_CPU_BACKWARD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward


class _CpuPrefixAttention(torch.autograd.Function):
    """Queries over the keys before their chunk (no mask) and over their own chunk (causal), on CPU's flash kernel,
    the two merged by their log-sum-exp; the backward gives each block the merged output and log-sum-exp, as ring
    attention does, so each block's gradients are its share of the whole softmax's. CPU SDPA has no lower-right causal
    kernel: a mask would send it to the math path, which saves the whole score matrix (quadratic in the sequence)."""

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, past_k: torch.Tensor, past_v: torch.Tensor, own_k: torch.Tensor,
                own_v: torch.Tensor, scale: float | None) -> torch.Tensor:
        out, lse = _FLASH_CPU(q, own_k, own_v, 0.0, True, scale=scale)
        if past_k.shape[2]:
            past_out, past_lse = _FLASH_CPU(q, past_k, past_v, 0.0, False, scale=scale)
            merged = torch.logaddexp(past_lse, lse)
            out = (torch.exp(past_lse - merged).unsqueeze(-1) * past_out
                   + torch.exp(lse - merged).unsqueeze(-1) * out).to(q.dtype)
            lse = merged
        ctx.save_for_backward(q, past_k, past_v, own_k, own_v, out, lse)
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        q, past_k, past_v, own_k, own_v, out, lse = ctx.saved_tensors
        grad = grad.contiguous()
        dq, own_dk, own_dv = _FLASH_CPU_BACKWARD(grad, q, own_k, own_v, out, lse, 0.0, True, scale=ctx.scale)
        if past_k.shape[2]:
            past_dq, past_dk, past_dv = _FLASH_CPU_BACKWARD(grad, q, past_k, past_v, out, lse, 0.0, False,
                                                            scale=ctx.scale)
            dq = dq + past_dq
        else:
            past_dk, past_dv = torch.zeros_like(past_k), torch.zeros_like(past_v)
        return dq, past_dk, past_dv, own_dk, own_dv, None


def prefix_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None) -> torch.Tensor:
    """Queries that are the last `q_len` positions of the `k_len` keys: causal, aligned to the lower right. On CPU
    by two flash blocks merged; on CUDA by its kernels' lower-right causal bias; elsewhere with a mask."""
    if q.device.type == "cpu":
        return cpu_prefix_attention(q, k, v, scale)
    if q.is_cuda:
        return lower_right_attention(q, k, v, scale)
    return masked_prefix_attention(q, k, v, scale)


def cpu_prefix_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None) -> torch.Tensor:
    cut = k.shape[2] - q.shape[2]
    return _CpuPrefixAttention.apply(q, k[:, :, :cut], v[:, :, :cut], k[:, :, cut:], v[:, :, cut:], scale)


def lower_right_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None) -> torch.Tensor:
    """CUDA's flash and efficient kernels apply a lower-right causal bias without building it; they take it with
    equal heads, so grouped key/value heads are repeated."""
    if k.shape[1] != q.shape[1]:
        k, v = (t.repeat_interleave(q.shape[1] // k.shape[1], dim=1) for t in (k, v))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(q.shape[2], k.shape[2]), scale=scale)


def masked_prefix_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None) -> torch.Tensor:
    q_len, k_len = q.shape[2], k.shape[2]
    mask = torch.ones(q_len, k_len, dtype=torch.bool, device=q.device).tril(k_len - q_len)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=k.shape[1] != q.shape[1])


def cp_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, is_causal: bool = True,
                 scale: float | None = None, hcg: HybridGroup | None = None) -> torch.Tensor:
    """`F.scaled_dot_product_attention` over the whole sequence, for this cp rank's two chunks of it.

    Args:
        q, k, v: `[batch, heads, 2·chunk, head_dim]`, this cp rank's chunks r and 2·cp_degree − 1 − r of the
            sequence, in that order (as `parallel.split_sequence` gives them); k and v may have fewer heads
            (grouped-query attention), a divisor of q's.
        is_causal, scale: as SDPA's, over global positions.

    Returns:
        `[batch, heads, 2·chunk, head_dim]`, the attention output of this rank's chunks. At cp_degree 1, plain SDPA.

    Example::

        y = parallel.cp_attention(q, k, v)        # q, k, v: this rank's chunks at cp 2 (a quarter of the row each)
    """
    hcg = hcg or current()
    parts = hcg.cp_size
    record_call(CALLS, parts, q, k)
    heads, kv_heads = q.shape[1], k.shape[1]
    if parts == 1:
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale, enable_gqa=kv_heads != heads)
    if q.shape[2] % 2 or k.shape[2] != q.shape[2]:
        raise ValueError(f"under cp_degree {parts} q, k and v hold this rank's two equal chunks of the sequence: "
                         f"got {q.shape[2]} query and {k.shape[2]} key positions")
    keys, values = gather_sequence(k, v, hcg.cp_group, parts)
    if not is_causal:
        return F.scaled_dot_product_attention(q, keys, values, scale=scale, enable_gqa=kv_heads != heads)
    chunk = q.shape[2] // 2
    outs = []
    for slot, c in enumerate((hcg.cp_rank, 2 * parts - 1 - hcg.cp_rank)):
        end = (c + 1) * chunk  # chunk c attends over every key up to its own last position
        outs.append(prefix_attention(q[:, :, slot * chunk:(slot + 1) * chunk], keys[:, :, :end], values[:, :, :end],
                                      scale))
    return torch.cat(outs, dim=2)
