"""Data parallelism: a dp 2 training step of a small Hugging Face Llama under HybridParallelOptimizer (the dp average
overlapped with the backward, bucket by bucket) next to torch's DistributedDataParallel on the same model and data,
and the same step with the average after the backward (the runtime before the overlap), interleaved in one run. Then
when each bucket's all-reduce started, from the backward's first gradient, next to how long the backward took.

Run: .venv/bin/python bench/dp.py [--device cuda]
"""

from __future__ import annotations

import copy
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

VOCAB, HIDDEN, LAYERS, ROWS, SEQ = 4096, 256, 4, 4, 128


def _llama():
    import transformers

    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=4 * HIDDEN,
                                      num_hidden_layers=LAYERS, num_attention_heads=8, num_key_value_heads=4,
                                      max_position_embeddings=SEQ, tie_word_embeddings=False)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config)


def _measure(rank: int, world: int, device: str, rounds: int, bucket_mb: float) -> dict:
    import parallel
    import strategy
    from parallel.training.dp_overlap import DpBuckets

    hcg = parallel.init(strategy.loads(f"hybrid_configs {{ dp_degree: {world} }}"))
    dev = torch.device(device, rank) if device == "cuda" else torch.device("cpu")
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    base = _llama().to(dev, dtype)
    ids = torch.randint(0, VOCAB, (ROWS, SEQ), generator=torch.Generator().manual_seed(rank)).to(dev)

    ours = copy.deepcopy(base)
    opt = parallel.HybridParallelOptimizer(torch.optim.SGD(ours.parameters(), lr=1e-4))
    assert opt.dp_buckets is not None
    opt.dp_buckets.remove()  # DDP's bucket size, for a like-for-like comparison
    opt.dp_buckets = DpBuckets(list(ours.parameters()), hcg.dp_group, reducing=lambda: not opt.accumulating,
                               bucket_bytes=int(bucket_mb * 2**20))
    after = copy.deepcopy(base)
    opt_after = parallel.HybridParallelOptimizer(torch.optim.SGD(after.parameters(), lr=1e-4))
    opt_after.dp_buckets.remove()  # type: ignore[union-attr]
    opt_after.dp_buckets = None  # the average in step(), after the backward
    ddp = torch.nn.parallel.DistributedDataParallel(copy.deepcopy(base), process_group=hcg.dp_group,
                                                    bucket_cap_mb=bucket_mb)
    opt_ddp = torch.optim.SGD(ddp.parameters(), lr=1e-4)

    def step(model, optimizer):
        def run() -> None:
            model(input_ids=ids, labels=ids).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        return run

    timer = harness.Timer(device, hcg.dp_group)
    times = harness.interleaved({"ddp": step(ddp, opt_ddp), "ours": step(ours, opt), "after": step(after, opt_after)},
                                timer, rounds)
    times = {k: harness.max_over_ranks(v) for k, v in times.items()}
    # When the buckets started: one more backward of ours, timed.
    starts, backward = [], []
    for _ in range(5):
        dist.barrier(group=hcg.dp_group)
        ours(input_ids=ids, labels=ids).loss.backward()
        backward.append(time.perf_counter() - opt.dp_buckets.backward_started)  # first gradient to the end
        starts.append(opt.dp_buckets.starts())
        opt.step()
        opt.zero_grad()
    return {"times": times, "buckets": len(opt.dp_buckets.buckets), "starts": starts[-1],
            "backward": statistics.median(backward)}


def main() -> None:
    args = harness.parse_args(__doc__.split("\n")[0], **{"--bucket-mb": dict(type=float, default=1.0,
                                                                               help="bucket size (DDP's bucket_cap_mb)")})
    r = harness.run_ranks(2, args.device, _measure, args.rounds, args.bucket_mb)
    t = r["times"]
    print(harness.table(
        f"dp 2 step of a small Llama ({LAYERS} layers, h {HIDDEN}, {ROWS}×{SEQ} tokens a rank; {args.bucket_mb:g} MiB "
        f"buckets; {harness.machine(args.device)})",
        ["variant", "ms / step", "× DDP"],
        [["torch DDP", t["ddp"] * 1e3, 1.0],
         ["HybridParallelOptimizer, overlapped", t["ours"] * 1e3, t["ours"] / t["ddp"]],
         ["HybridParallelOptimizer, average after the backward", t["after"] * 1e3, t["after"] / t["ddp"]]],
        "the slowest rank's median over interleaved rounds"))
    print()
    starts = ", ".join(f"{s * 1e3:.1f}" for s in r["starts"])
    print(harness.table("when each bucket's all-reduce started (ms from the backward's first gradient)",
                        ["buckets", "backward ms (first gradient to its end)", "starts ms"],
                        [[r["buckets"], r["backward"] * 1e3, starts]],
                        "a bucket starting before the backward's end overlaps the rest of the backward"))
    harness.save("dp", args.device, {"rounds": args.rounds, "bucket_mb": args.bucket_mb, **r}, args.json)


if __name__ == "__main__":
    main()
