"""The forward of an experts module split over the ep group: dispatch, local experts, combine.

Every rank routes its own tokens (the model's router ran before this forward), so each (token, chosen expert) pair
is sent to the ep rank that holds the expert, by one all-to-all (the counts exchanged first; nothing is dropped for
capacity), the rank's experts run on what they received, one matmul pair per expert, and the results return by the
inverse all-to-all, to be weighted and summed per token as the model's own forward does. Both exchanges are torch's
autograd all-to-all: the backward sends the gradients the reverse way, so each expert's weights get the gradient of
every token routed to it, from every rank.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed._functional_collectives import all_to_all_single_autograd, wait_tensor

from ..tensor.sequence import _GatherFromSequence, _ScatterToSequence
from ..topology.groups import HybridGroup

__all__ = ["expert_parallel_forward"]


def _exchange_counts(send: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    """How many pairs each rank sends this one, for the sizes of the all-to-all."""
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    return recv


def expert_parallel_forward(module: nn.Module, hcg: HybridGroup, own: Callable[..., torch.Tensor],
                            hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                            top_k_weights: torch.Tensor) -> torch.Tensor:
    """transformers' experts forward (`[tokens, hidden]`, `[tokens, k]` expert ids and weights -> `[tokens, hidden]`)
    with `module` holding this ep rank's block of the experts (`split_experts`).

    When the ep group takes in ranks of this rank's mp group (`hcg.ep_mp_group`), those hold the same tokens: each
    dispatches only its share (rows ep_mp_rank·c … of c = ⌈tokens / ep_mp_size⌉) and the shares are all-gathered
    after the combine, so no token is computed twice (the gathered result's gradient is whole on every mp rank, so
    the gather's backward keeps this share, and the split's all-gathers the shares' gradients)."""
    if hcg.ep_mp_size == 1:
        return _dispatch(module, hcg, own, hidden_states, top_k_index, top_k_weights)
    group, parts, me = hcg.ep_mp_group, hcg.ep_mp_size, hcg.ep_mp_rank
    tokens = hidden_states.shape[0]
    share = -(-tokens // parts)
    rows = slice(min(me * share, tokens), min((me + 1) * share, tokens))

    def my_share(t: torch.Tensor) -> torch.Tensor:  # (the router's weights too: their gradient is whole on every rank)
        padded = nn.functional.pad(t, (0, 0, 0, share * parts - tokens))
        return _ScatterToSequence.apply(padded, 0, group)[: rows.stop - rows.start]

    out = _dispatch(module, hcg, own, my_share(hidden_states), top_k_index[rows], my_share(top_k_weights))
    out = nn.functional.pad(out, (0, 0, 0, share - out.shape[0]))
    return _GatherFromSequence.apply(out, 0, group)[:tokens]


def _dispatch(module: nn.Module, hcg: HybridGroup, own: Callable[..., torch.Tensor], hidden_states: torch.Tensor,
              top_k_index: torch.Tensor, top_k_weights: torch.Tensor) -> torch.Tensor:
    """Dispatch, the local experts, combine: for these tokens, over the ep group."""
    group = hcg.ep_group
    assert group is not None
    local = int(getattr(module, "gate_up_proj").shape[0])
    tokens, k = top_k_index.shape
    flat = top_k_index.reshape(-1)
    order = torch.argsort(flat, stable=True)  # by expert, so by the rank that holds it
    chosen = flat[order]
    token_of = order // k
    send_counts = torch.bincount(chosen // local, minlength=hcg.ep_size)
    recv_counts = _exchange_counts(send_counts, group)
    send_sizes, recv_sizes = send_counts.tolist(), recv_counts.tolist()
    experts_in = torch.empty(sum(recv_sizes), dtype=chosen.dtype, device=chosen.device)
    dist.all_to_all_single(experts_in, (chosen % local).contiguous(), recv_sizes, send_sizes, group=group)
    received = wait_tensor(all_to_all_single_autograd(hidden_states[token_of], recv_sizes, send_sizes, group))
    outputs = _local_experts(own, received, experts_in)
    back = wait_tensor(all_to_all_single_autograd(outputs, send_sizes, recv_sizes, group))
    weights = top_k_weights.reshape(-1)[order]
    weighted = (back * weights.unsqueeze(-1)).to(hidden_states.dtype)
    return torch.zeros_like(hidden_states).index_add(0, token_of, weighted)


def _local_experts(own: Callable[..., torch.Tensor], x: torch.Tensor, expert: torch.Tensor) -> torch.Tensor:
    """Each received pair through its expert of this rank's block, in the order received: the module's own forward,
    each row routed to its one expert with weight 1."""
    if x.shape[0] == 0:
        # Nothing received still depends on `x`: every rank must run the backward of the all-to-all that brought it,
        # or the ranks that did send would wait for this one's gradients in a collective it never joins.
        return x * 0  # [0, hidden]: experts map hidden to hidden
    return own(x, expert.unsqueeze(1), torch.ones(x.shape[0], 1, dtype=x.dtype, device=x.device))
