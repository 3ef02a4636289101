"""cp (context parallelism): a Hugging Face Llama's training step at 1k-8k tokens per row, cp 1, 2 and 4, next to the
same attention written by hand on torch.distributed (the same all-gather and reduce-scatter, the same attention kernels) and
next to sep (Ulysses) at the same degree; the activations autograd saves per rank, against cp 1.

Run: .venv/bin/python bench/cp.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

import parallel  # noqa: E402
from sep import HEADS, HIDDEN, KV_HEADS, LAYERS, LENGTHS, VOCAB, llama, saved_bytes, train_step  # noqa: E402
from parallel.cp.attention import prefix_attention  # noqa: E402  (the same kernels: what differs is the exchange)
import strategy  # noqa: E402

class _AllGather(torch.autograd.Function):
    """Llama 3's exchange, by hand: all_gather_single forward, reduce_scatter_single for the gradient."""

    @staticmethod
    def forward(ctx, x, group, parts):
        ctx.group, ctx.parts = group, parts
        out = x.new_empty((parts * x.shape[0], *x.shape[1:]))
        dist.all_gather_single(out, x.contiguous(), group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        out = grad.new_empty((grad.shape[0] // ctx.parts, *grad.shape[1:]))
        dist.reduce_scatter_single(out, grad.contiguous(), group=ctx.group)
        return out, None, None


def _by_hand_attention(group, parts, rank):
    """Keys and values of the cp group gathered, put in order, each query chunk over its prefix (lower-right mask)."""

    def attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **kwargs):
        b, h, s, d = key.shape
        chunk = s // 2
        g = _AllGather.apply(torch.stack([key, value]), group, parts).view(parts, 2, b, h, 2, chunk, d)
        first = g[:, :, :, :, 0].permute(1, 2, 3, 0, 4, 5).reshape(2, b, h, parts * chunk, d)
        second = g.flip(0)[:, :, :, :, 1].permute(1, 2, 3, 0, 4, 5).reshape(2, b, h, parts * chunk, d)
        keys, values = torch.cat([first, second], dim=3)
        outs = [prefix_attention(query[:, :, slot * chunk:(slot + 1) * chunk], keys[:, :, :(c + 1) * chunk],
                                 values[:, :, :(c + 1) * chunk], scaling)
                for slot, c in enumerate((rank, 2 * parts - 1 - rank))]
        return torch.cat(outs, dim=2).transpose(1, 2).contiguous(), None

    return attention


def run(rank, world, device, rounds, axis):
    from transformers import AttentionInterface

    hcg = parallel.init(strategy.loads(f"hybrid_configs {{ dp_degree: 1 {axis}_degree: {world} }}"))
    ours = parallel.parallelize(llama(), plan={})
    variants = {"ours": ours}
    if axis == "cp" and world > 1:
        theirs = llama()
        AttentionInterface.register("by_hand_cp", _by_hand_attention(hcg.cp_group, world, hcg.cp_rank))
        theirs.config._attn_implementation = "by_hand_cp"
        variants["by hand"] = theirs
    out = {}
    for length in LENGTHS:
        ids = torch.randint(0, VOCAB, (1, length), generator=torch.Generator().manual_seed(length))
        times = harness.interleaved({name: (lambda m=m: train_step(m, ids, hcg)) for name, m in variants.items()},
                                    harness.Timer(device), rounds, warmup=1)
        out[length] = {name: harness.max_over_ranks(t) for name, t in times.items()}
        out[length]["saved"] = harness.max_over_ranks(saved_bytes(ours, ids, hcg))
    return out


def main() -> None:
    args = harness.parse_args(__doc__.split("\n")[0])
    rounds = max(3, args.rounds // 5)
    cp = {degree: harness.run_ranks(degree, "cpu", run, rounds, "cp") for degree in (1, 2, 4)}
    sep = {degree: harness.run_ranks(degree, "cpu", run, rounds, "sep") for degree in (2, 4)}
    mib = 1 / 2**20
    rows = []
    for length in LENGTHS:
        base = cp[1][length]["saved"]
        for degree in (1, 2, 4):
            r = cp[degree][length]
            hand = r.get("by hand")
            # Bytes each rank sends a step: its keys and values (2 · kv heads · 2 chunks · head_dim, fp32) in the
            # all-gather of each layer's forward, their gradients in the backward's reduce-scatter.
            kv = 2 * KV_HEADS * (length // degree) * (HIDDEN // HEADS) * 4 * (degree - 1) if degree > 1 else 0
            rows.append([f"{length} tokens, cp {degree}", f"{r['ours'] * 1e3:.0f}",
                         f"{hand * 1e3:.0f}" if hand else "-", f"{r['ours'] / hand:.3f}" if hand else "-",
                         f"{sep[degree][length]['ours'] * 1e3:.0f}" if degree > 1 else "-",
                         r["saved"] * mib, f"{r['saved'] / base:.2f}", 2 * LAYERS * kv * mib])
    print(harness.table(
        f"Llama (h {HIDDEN}, {HEADS} heads / {KV_HEADS} kv, {LAYERS} layers), one row: step time and what each rank holds",
        ["rows", "ours ms", "by hand ms", "ours / by hand", "sep ms", "saved MiB", "saved / cp 1", "kv sent MiB"], rows,
        "'by hand': the same model with the same attention written directly on dist.all_gather_single / "
        "reduce_scatter_single, calling the same kernels (on CPU two flash-attention blocks per query chunk, merged "
        "by log-sum-exp). 'sep': Ulysses (parallel.sep_attention) at the same degree. "
        "cp 4 runs 4 ranks on this machine's 2 cores. kv sent: each rank's keys and values, forward and backward, "
        "(cp-1) times over the layers."))
    harness.save("cp", "cpu", {"cp": {str(k): v for k, v in cp.items()}, "sep": {str(k): v for k, v in sep.items()}},
                 args.json)


if __name__ == "__main__":
    main()
