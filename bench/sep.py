"""sep (Ulysses): a Hugging Face Llama's training step at 1k-8k tokens per row, sep 1, 2 and 4, next to Ulysses written
by hand on the same model (the same all-to-alls, called directly); the activations autograd saves per rank and the
all-to-all volume per rank, against their scaling laws (1/sep and (sep-1)/sep^2 of the sequence).

Run: .venv/bin/python bench/sep.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

import parallel  # noqa: E402
import strategy  # noqa: E402

LENGTHS = (1024, 2048, 4096, 8192)
HIDDEN, HEADS, KV_HEADS, LAYERS, VOCAB = 64, 4, 2, 2, 256


def llama():
    import transformers

    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=2 * HIDDEN,
                                      num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
                                      max_position_embeddings=max(LENGTHS), tie_word_embeddings=False,
                                      attn_implementation="sdpa")
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config)


class _AllToAll(torch.autograd.Function):
    """DeepSpeed-Ulysses' exchange, by hand: all_to_all_single forward, the same exchange for the gradient."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x.contiguous(), group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        out = torch.empty_like(grad)
        dist.all_to_all_single(out, grad.contiguous(), group=ctx.group)
        return out, None


def _by_hand_attention(group, parts):
    def attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **kwargs):
        b, h, s, d = query.shape
        key = key.repeat_interleave(max(1, parts // key.shape[1]), dim=1) if key.shape[1] % parts else key
        value = value.repeat_interleave(max(1, parts // value.shape[1]), dim=1) if value.shape[1] % parts else value

        def gather_sequence(t):
            heads = t.shape[1]
            t = t.reshape(b, parts, heads // parts, s, d).transpose(0, 1)
            return _AllToAll.apply(t, group).permute(1, 2, 0, 3, 4).reshape(b, heads // parts, parts * s, d)

        q, k, v = gather_sequence(query), gather_sequence(key), gather_sequence(value)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scaling, enable_gqa=k.shape[1] != q.shape[1])
        y = y.reshape(b, h // parts, parts, s, d).permute(2, 0, 1, 3, 4)
        y = _AllToAll.apply(y, group).transpose(0, 1).reshape(b, h, s, d)
        return y.transpose(1, 2).contiguous(), None

    return attention


def train_step(model, ids, hcg):
    piece = parallel.split_sequence({"input_ids": ids}, hcg=hcg)
    model(**piece).loss.backward()
    model.zero_grad(set_to_none=True)


def saved_bytes(model, ids, hcg) -> int:
    sizes: list[int] = []

    def pack(t):
        sizes.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(**parallel.split_sequence({"input_ids": ids}, hcg=hcg)).loss
    loss.backward()
    model.zero_grad(set_to_none=True)
    return sum(sizes)


def run(rank, world, device, rounds):
    from transformers import AttentionInterface

    hcg = parallel.init(strategy.loads(f"hybrid_configs {{ dp_degree: 1 sep_degree: {world} }}"))
    ours = parallel.parallelize(llama(), plan={})
    theirs = llama()
    if world > 1:
        AttentionInterface.register("by_hand_ulysses", _by_hand_attention(hcg.sep_group, world))
        theirs.config._attn_implementation = "by_hand_ulysses"
    out = {}
    for length in LENGTHS:
        ids = torch.randint(0, VOCAB, (1, length), generator=torch.Generator().manual_seed(length))
        times = harness.interleaved({"ours": lambda: train_step(ours, ids, hcg), "by hand": lambda: train_step(theirs, ids, hcg)},
                                    harness.Timer(device), rounds, warmup=1)
        # Bytes each rank sends per step: q, k, v and the output forward, their gradients backward; (sep-1)/sep
        # of each leaves the rank.
        local = length // world
        kv = max(KV_HEADS, world) if KV_HEADS % world else KV_HEADS
        per_layer = (2 * HEADS + 2 * kv) * local * (HIDDEN // HEADS) * 4 * (world - 1) / world
        out[length] = {"ours": harness.max_over_ranks(times["ours"]), "by hand": harness.max_over_ranks(times["by hand"]),
                       "saved": harness.max_over_ranks(saved_bytes(ours, ids, hcg)), "a2a": 2 * LAYERS * per_layer}
    return out


def main() -> None:
    args = harness.parse_args(__doc__.split("\n")[0], **{"--lengths": {"type": int, "nargs": "*", "default": list(LENGTHS)}})
    rows, results = [], {}
    mib = 1 / 2**20
    for sep in (1, 2, 4):
        results[sep] = harness.run_ranks(sep, "cpu", run, max(3, args.rounds // 5))
    for length in LENGTHS:
        base = results[1][length]["saved"]
        for sep in (1, 2, 4):
            r = results[sep][length]
            ratio = r["ours"] / r["by hand"]
            rows.append([f"{length} tokens, sep {sep}", f"{r['ours'] * 1e3:.0f}", f"{r['by hand'] * 1e3:.0f}", f"{ratio:.3f}",
                         r["saved"] * mib, f"{r['saved'] / base:.2f} (1/sep: {1 / sep:.2f})", r["a2a"] * mib])
    print(harness.table(
        f"Llama (h {HIDDEN}, {HEADS} heads / {KV_HEADS} kv, {LAYERS} layers), one row: step time and what each rank holds",
        ["rows", "ours ms", "by hand ms", "ratio", "saved MiB", "saved / sep 1", "all-to-all MiB sent"], rows,
        "'by hand': the same model with Ulysses written directly on dist.all_to_all_single (DeepSpeed's way). "
        "sep 4 runs 4 ranks on this machine's 2 cores. All-to-all volume per rank: (2 q/out + 2 k/v heads, repeated "
        "to sep when fewer) × tokens/sep × head_dim × (sep-1)/sep, forward and backward."))
    harness.save("sep", "cpu", {"results": {str(k): v for k, v in results.items()}}, args.json)


if __name__ == "__main__":
    main()
