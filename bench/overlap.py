"""Overlap benchmark: ColumnParallelLinear's backward with and without mp_async_allreduce, next to the dx
all-reduce alone and the dW matmul alone, so the table shows how much of the ideal saving
(min(all-reduce, dW)) was realised.

Run: .venv/bin/python bench/overlap.py [--device cuda]
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from tp_block import with_flags  # noqa: E402

import parallel  # noqa: E402

SHAPES = {"B=2048 H=1024 F=4096": (2048, 1024, 4096), "B=8192 H=512 F=2048": (8192, 512, 2048)}


def run(rank, world, device, rounds):
    hcg, dtype, dev, timer = harness.setup(rank, world, device)  # bf16 (with fp32 main_grad) on GPUs
    out = {}
    for label, (b, h, f) in SHAPES.items():
        x = torch.randn(b, h, device=dev, dtype=dtype, requires_grad=True)
        layers = {
            name: parallel.ColumnParallelLinear(h, f, gather_output=False, hcg=with_flags(hcg, flags), device=dev, dtype=dtype)
            for name, flags in (("backward, sync all-reduce", (False, False, False)), ("backward, mp_async_allreduce", (True, False, False)))
        }
        gy = torch.randn(b, f // world, device=dev, dtype=dtype)
        dx = torch.randn(b, h, device=dev, dtype=dtype)

        def backward_of(layer):
            def go():
                y = layer(x)  # the forward is outside the timed region
                return lambda: y.backward(gy)
            return go

        variants = {name: backward_of(layer) for name, layer in layers.items()}
        variants["dx all-reduce alone"] = lambda: (lambda: dist.all_reduce(dx))
        variants["dW matmul alone"] = lambda: (lambda: gy.t() @ x.detach())
        samples: dict[str, list[float]] = {n: [] for n in variants}
        for r in range(rounds + 2):
            for name, prepare in variants.items():
                fn = prepare()
                t = timer(fn)
                if r >= 2:
                    samples[name].append(t)
                x.grad = None
                for layer in layers.values():
                    layer.zero_grad(set_to_none=True)
        out[label] = {n: harness.max_over_ranks(statistics.median(v)) for n, v in samples.items()}
    return out


def main() -> None:
    args = harness.parse_args(__doc__.split("\n")[0])
    results = harness.run_ranks(2, args.device, run, args.rounds)
    for label, t in results.items():
        sync, overlapped = t["backward, sync all-reduce"], t["backward, mp_async_allreduce"]
        comm, dw = t["dx all-reduce alone"], t["dW matmul alone"]
        ideal = min(comm, dw)
        rows = [[n, v * 1e3] for n, v in t.items()]
        rows += [["saving realised (sync - async)", (sync - overlapped) * 1e3], ["ideal saving min(all-reduce, dW)", ideal * 1e3]]
        share = (sync - overlapped) / ideal if ideal > 0 else float("nan")
        print(harness.table(f"{label}: ColumnParallelLinear backward, 2 ranks", ["what", "ms"], rows,
                            note=f"realised {share:.0%} of the ideal saving"))
        print()
        t["realised_share"] = share
    harness.save("overlap", args.device, {"rounds": args.rounds, "results": results}, args.json)


if __name__ == "__main__":
    main()
