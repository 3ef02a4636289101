"""Fused gradient accumulation benchmark: K micro-batches through ColumnParallelLinear with and without
mp_fused_linear_param_grad_add: time, and what the backward allocates according to the torch profiler's
memory accounting (the fused path must allocate no dW-sized temporaries).

Run: .venv/bin/python bench/fused.py [--device cuda]
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from tp_block import with_flags  # noqa: E402

import parallel  # noqa: E402

B, H, F = 512, 1024, 4096  # the output [B, F/2] and dW [F/2, H] differ in size, so dW-sized means dW
MICRO_BATCHES = (1, 4, 8)


def backward_allocations(layer, xs, gy, dw_bytes: int, device: str) -> tuple[int, int]:
    """(bytes allocated, number of dW-sized allocations) in the backward passes only, from the profiler."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    outputs = [layer(x) for x in xs]  # forwards outside the profiled region
    with profile(activities=activities, profile_memory=True) as prof:
        for y in outputs:
            y.backward(gy)
    # Each op's self memory is what it allocated and kept (its output, for a matmul).
    sizes = [max(e.self_cpu_memory_usage, e.self_device_memory_usage) for e in prof.events()]
    sizes = [s for s in sizes if s > 0]
    return sum(sizes), sum(1 for s in sizes if s == dw_bytes)


def run(rank, world, device, rounds):
    hcg, dtype, dev, timer = harness.setup(rank, world, device)  # bf16 (with fp32 main_grad) on GPUs
    variants = {
        "unfused (autograd accumulates .grad)": (True, False, False),
        "fused into main_grad": (True, False, True),
    }
    layers = {}
    for name, flags in variants.items():
        torch.manual_seed(0)
        layers[name] = parallel.ColumnParallelLinear(H, F, gather_output=False, hcg=with_flags(hcg, flags), device=dev, dtype=dtype)
        if flags[2]:
            parallel.add_main_grad(layers[name])  # allocated once, outside the measured steps
    # Inputs that need a gradient, as hidden states inside a network do (so dx is computed and all-reduced).
    xs = [torch.randn(B, H, device=dev, dtype=dtype, requires_grad=True) for _ in range(max(MICRO_BATCHES))]
    gy = torch.randn(B, F // world, device=dev, dtype=dtype)
    dw_bytes = (F // world) * H * torch.finfo(dtype).bits // 8
    out = {}
    for k in MICRO_BATCHES:
        def micro_batches(layer, k=k):
            def go():
                for x in xs[:k]:
                    layer(x).backward(gy)
            return go

        def reset():
            for layer in layers.values():
                for p in layer.parameters():
                    if getattr(p, "main_grad", None) is not None:
                        p.main_grad.zero_()
                    p.grad = None

        samples = {name: [] for name in layers}
        for r in range(rounds + 1):
            for name, layer in layers.items():
                reset()
                # The first unfused micro-batch allocates .grad; later ones allocate dW and add it.
                t = timer(micro_batches(layer))
                if r:
                    samples[name].append(t)
        row = {}
        for name, layer in layers.items():
            reset()
            bytes_, dw_allocs = backward_allocations(layer, xs[:k], gy, dw_bytes, device)
            row[name] = {"ms": harness.max_over_ranks(statistics.median(samples[name])) * 1e3,
                         "bytes_allocated": bytes_, "dw_sized_allocations": dw_allocs}
        out[f"K={k}"] = row
    return {"dw_bytes": dw_bytes, "shape": f"B={B} H={H} F={F} (dW shard {F // world}x{H})", "results": out}


def main() -> None:
    args = harness.parse_args(__doc__.split("\n")[0])
    res = harness.run_ranks(2, args.device, run, args.rounds)
    rows = []
    for k, by_variant in res["results"].items():
        for name, r in by_variant.items():
            rows.append([k, name, r["ms"], f"{r['bytes_allocated'] / 2**20:.1f}", r["dw_sized_allocations"]])
    print(harness.table(f"{res['shape']}: K micro-batches forward+backward, 2 ranks",
                        ["K", "variant", "ms (fwd+bwd)", "MiB allocated in backward", "dW-sized allocations in backward"], rows,
                        note=f"dW shard = {res['dw_bytes'] / 2**20:.1f} MiB"))
    harness.save("fused", args.device, {"rounds": args.rounds, **res}, args.json)


if __name__ == "__main__":
    main()
