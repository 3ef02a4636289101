"""skip_c_identity benchmark: autograd nodes and copies per step of the TP block, and step time, with and
without mp_skip_c_identity (mp_async_allreduce on in both, as the flag requires).

Run: .venv/bin/python bench/skip.py [--device cuda]
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from tp_block import with_flags  # noqa: E402

import parallel  # noqa: E402
from parallel.introspect import OpCounter, graph_nodes  # noqa: E402

B, H, F_ = 512, 1024, 4096
LAYERS = 4  # blocks of Column -> GELU -> Row, as in a small transformer's MLPs


def run(rank, world, device, rounds):
    hcg, dtype, dev, timer = harness.setup(rank, world, device)  # bf16 (with fp32 main_grad) on GPUs
    x = torch.randn(B, H, device=dev, dtype=dtype, requires_grad=True)
    gy = torch.randn(B, H, device=dev, dtype=dtype)
    variants, stats = {}, {}
    for name, flags in (("async, with c_identity", (True, False, False)), ("async + mp_skip_c_identity", (True, True, False))):
        h = with_flags(hcg, flags)
        blocks = [(parallel.ColumnParallelLinear(H, F_, gather_output=False, hcg=h, device=dev, dtype=dtype),
                   parallel.RowParallelLinear(F_, H, input_is_parallel=True, hcg=h, device=dev, dtype=dtype)) for _ in range(LAYERS)]

        def forward(blocks=blocks):
            y = x
            for col, row in blocks:
                y = y + row(F.gelu(col(y)))
            return y

        def step(blocks=blocks, forward=forward):
            forward().backward(gy)
            for col, row in blocks:
                col.zero_grad(set_to_none=True)
                row.zero_grad(set_to_none=True)

        y = forward()
        counter = OpCounter()
        with counter:
            y.backward(gy)
        nodes = graph_nodes(forward())
        stats[name] = {"autograd_nodes": nodes, "backward_copies": counter.copies}
        variants[name] = step
    times = harness.interleaved(variants, timer, rounds)
    for name in stats:
        stats[name]["ms"] = harness.max_over_ranks(times[name]) * 1e3
    return stats


def main() -> None:
    args = harness.parse_args(__doc__.split("\n")[0])
    stats = harness.run_ranks(2, args.device, run, args.rounds)
    rows = [[name, v["autograd_nodes"], v["backward_copies"], v["ms"]] for name, v in stats.items()]
    print(harness.table(f"{LAYERS} blocks (Column -> GELU -> Row, B={B} H={H} F={F_}) per step, 2 ranks",
                        ["variant", "autograd nodes", "copies in backward", "ms/step"], rows))
    harness.save("skip", args.device, {"rounds": args.rounds, "results": stats}, args.json)


if __name__ == "__main__":
    main()
