"""TP block benchmark: ColumnParallelLinear -> GELU -> RowParallelLinear, forward + backward, per flag
combination, next to torch's own tensor parallelism (DTensor parallelize_module) and a minimal
hand-written version (local shards, one autograd all-reduce each way).

Run: .venv/bin/python bench/tp_block.py [--device cuda]
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
from collections import OrderedDict
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.autograd import Function

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

import parallel  # noqa: E402

SHAPES = {"B=512 H=1024 F=4096": (512, 1024, 4096), "comm-heavy B=4096 H=256 F=512": (4096, 256, 512)}
FLAGS = [f for f in itertools.product([False, True], repeat=3) if f[0] or not (f[1] or f[2])]


def flag_name(flags: tuple[bool, bool, bool]) -> str:
    names = [n for n, on in zip(("async", "skip", "fused"), flags) if on]
    return "ours: " + ("+".join(names) if names else "no flags")


def with_flags(hcg: parallel.HybridGroup, flags) -> parallel.HybridGroup:
    """The same groups with other mp settings: layers take their settings from the hcg they are given."""
    mp = dataclasses.replace(hcg.resolved.mp, async_allreduce=flags[0], skip_c_identity=flags[1], fused_linear_param_grad_add=flags[2])
    return dataclasses.replace(hcg, resolved=dataclasses.replace(hcg.resolved, mp=mp))


class _Copy(Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        g = g.contiguous()
        dist.all_reduce(g)
        return g


class _Reduce(Function):
    @staticmethod
    def forward(ctx, x):
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g


def ours_step(hcg, flags, h, f, x, gy, dtype):
    col = parallel.ColumnParallelLinear(h, f, gather_output=False, hcg=with_flags(hcg, flags), device=x.device, dtype=dtype)
    row = parallel.RowParallelLinear(f, h, input_is_parallel=True, hcg=with_flags(hcg, flags), device=x.device, dtype=dtype)
    params = [*col.parameters(), *row.parameters()]
    if flags[2]:
        parallel.add_main_grad(params)

    def step():
        row(F.gelu(col(x))).backward(gy)
        for p in params:
            p.grad = None
            if getattr(p, "main_grad", None) is not None:
                p.main_grad.zero_()
    return step


def handwritten_step(hcg, h, f, x, gy, dtype):
    torch.manual_seed(0)
    w1 = nn.Parameter(torch.randn(f // hcg.mp_size, h, device=x.device, dtype=dtype) * 0.02)
    b1 = nn.Parameter(torch.zeros(f // hcg.mp_size, device=x.device, dtype=dtype))
    w2 = nn.Parameter(torch.randn(h, f // hcg.mp_size, device=x.device, dtype=dtype) * 0.02)
    b2 = nn.Parameter(torch.zeros(h, device=x.device, dtype=dtype))

    def step():
        y = _Reduce.apply(F.linear(F.gelu(F.linear(_Copy.apply(x), w1, b1)), w2)) + b2
        y.backward(gy)
        for p in (w1, b1, w2, b2):
            p.grad = None
    return step


def dtensor_step(device, world, h, f, x, gy, dtype):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh(device, (world,))
    block = nn.Sequential(OrderedDict(up=nn.Linear(h, f), act=nn.GELU(), down=nn.Linear(f, h))).to(device=x.device, dtype=dtype)
    parallelize_module(block, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})

    def step():
        block(x).backward(gy)
        block.zero_grad(set_to_none=True)
    return step


def run(rank, world, device, rounds):
    hcg, dtype, dev, timer = harness.setup(rank, world, device)  # bf16 (with fp32 main_grad) on GPUs
    out = {}
    for label, (b, h, f) in SHAPES.items():
        torch.manual_seed(1)
        x = torch.randn(b, h, device=dev, dtype=dtype, requires_grad=True)
        gy = torch.randn(b, h, device=dev, dtype=dtype)
        variants = {flag_name(fl): ours_step(hcg, fl, h, f, x, gy, dtype) for fl in FLAGS}
        variants["hand-written minimum"] = handwritten_step(hcg, h, f, x, gy, dtype)
        variants["torch DTensor (parallelize_module)"] = dtensor_step(device, world, h, f, x, gy, dtype)
        medians = harness.interleaved(variants, timer, rounds)
        out[label] = {name: harness.max_over_ranks(t) for name, t in medians.items()}
    return out


def main() -> None:
    args = harness.parse_args(__doc__.split("\n")[0])
    results = harness.run_ranks(2, args.device, run, args.rounds)
    for label, times in results.items():
        base, dt = times["hand-written minimum"], times["torch DTensor (parallelize_module)"]
        rows = [[name, t * 1e3, t / base, t / dt] for name, t in times.items()]
        print(harness.table(f"{label}: forward + backward, 2 ranks", ["variant", "ms/step", "vs hand-written", "vs DTensor"], rows))
        print()
    harness.save("tp_block", args.device, {"rounds": args.rounds, "results": results}, args.json)


if __name__ == "__main__":
    main()
