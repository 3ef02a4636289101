"""ep (expert parallelism): a small Qwen3-MoE's training step at ep 1, 2 and 4, next to the same dispatch written by
hand on dist.all_to_all_single (the same collectives and the same expert matmuls); tokens/s per rank and the expert
parameters each rank holds.

Run: .venv/bin/python bench/expert.py
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

import parallel  # noqa: E402
import strategy  # noqa: E402
from parallel.experts.dispatch import _exchange_counts, _local_experts  # noqa: E402  (the same expert matmuls)
from parallel.experts.interface import is_expert  # noqa: E402

HIDDEN, LAYERS, EXPERTS, TOP_K, VOCAB, ROWS, SEQ = 128, 2, 8, 2, 256, 4, 256


def qwen3_moe():
    import transformers

    config = transformers.Qwen3MoeConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                                         num_attention_heads=4, num_key_value_heads=2, num_experts=EXPERTS,
                                         num_experts_per_tok=TOP_K, moe_intermediate_size=2 * HIDDEN,
                                         max_position_embeddings=SEQ, output_router_logits=True,
                                         tie_word_embeddings=False)
    torch.manual_seed(0)
    return transformers.Qwen3MoeForCausalLM(config)


class _AllToAll(torch.autograd.Function):
    """all_to_all_single with sizes, by hand: the reverse exchange for the gradient."""

    @staticmethod
    def forward(ctx, x, recv_sizes, send_sizes, group):
        ctx.sizes, ctx.group = (recv_sizes, send_sizes), group
        out = x.new_empty((sum(recv_sizes), *x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), recv_sizes, send_sizes, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        recv_sizes, send_sizes = ctx.sizes
        out = grad.new_empty((sum(send_sizes), *grad.shape[1:]))
        dist.all_to_all_single(out, grad.contiguous(), send_sizes, recv_sizes, group=ctx.group)
        return out, None, None, None


def _by_hand(module, hcg, hidden_states, top_k_index, top_k_weights):
    group, local = hcg.ep_group, module.gate_up_proj.shape[0]
    k = top_k_index.shape[1]
    flat = top_k_index.reshape(-1)
    order = torch.argsort(flat, stable=True)
    chosen, token_of = flat[order], order // k
    send_counts = torch.bincount(chosen // local, minlength=hcg.ep_size)
    send_sizes, recv_sizes = send_counts.tolist(), _exchange_counts(send_counts, group).tolist()
    experts_in = torch.empty(sum(recv_sizes), dtype=chosen.dtype)
    dist.all_to_all_single(experts_in, (chosen % local).contiguous(), recv_sizes, send_sizes, group=group)
    received = _AllToAll.apply(hidden_states[token_of], recv_sizes, send_sizes, group)
    back = _AllToAll.apply(_local_experts(module, received, experts_in, local), send_sizes, recv_sizes, group)
    weighted = (back * top_k_weights.reshape(-1)[order].unsqueeze(-1)).to(hidden_states.dtype)
    return torch.zeros_like(hidden_states).index_add(0, token_of, weighted)


def _step(model, ids):
    model(input_ids=ids, labels=ids).loss.backward()
    model.zero_grad(set_to_none=True)


def run(rank, world, device, rounds):
    hcg = parallel.init(strategy.loads(f"hybrid_configs {{ dp_degree: -1 ep_degree: {world} }}"))
    ours = parallel.parallelize(qwen3_moe())
    variants = {"ours": ours}
    if world > 1:
        theirs = parallel.parallelize(qwen3_moe())
        for m in theirs.modules():
            if hasattr(m, "gate_up_proj"):
                m.forward = functools.partial(_by_hand, m, hcg)
        variants["by hand"] = theirs
    ids = torch.randint(0, VOCAB, (ROWS, SEQ), generator=torch.Generator().manual_seed(rank))
    times = harness.interleaved({name: (lambda m=m: _step(m, ids)) for name, m in variants.items()},
                                harness.Timer(device), rounds, warmup=1)
    out = {name: harness.max_over_ranks(t) for name, t in times.items()}
    out["expert_bytes"] = sum(p.numel() * p.element_size() for p in ours.parameters() if is_expert(p) or p.dim() == 3)
    return out


def main() -> None:
    args = harness.parse_args(__doc__.split("\n")[0])
    rounds = max(5, args.rounds // 3)
    results = {ep: harness.run_ranks(ep, "cpu", run, rounds) for ep in (1, 2, 4)}
    mib = 1 / 2**20
    rows = []
    for ep, r in results.items():
        hand = r.get("by hand")
        rows.append([f"ep {ep}", f"{r['ours'] * 1e3:.0f}", f"{hand * 1e3:.0f}" if hand else "-",
                     f"{r['ours'] / hand:.3f}" if hand else "-", f"{ROWS * SEQ / r['ours']:,.0f}",
                     r["expert_bytes"] * mib])
    print(harness.table(
        f"Qwen3-MoE (h {HIDDEN}, {LAYERS} layers, {EXPERTS} experts top-{TOP_K}), {ROWS} rows × {SEQ} tokens per rank: "
        "one training step",
        ["", "ours ms", "by hand ms", "ours / by hand", "tokens/s per rank", "expert MiB per rank"], rows,
        "'by hand': the same split model, its experts' forward written directly on dist.all_to_all_single in an "
        "autograd Function, calling the same expert matmuls. ep 4 runs 4 ranks on this machine's 2 cores."))
    harness.save("expert", "cpu", {"results": {str(k): v for k, v in results.items()}}, args.json)


if __name__ == "__main__":
    main()
