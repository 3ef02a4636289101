"""Scaling benchmark: the TP block (Column -> GELU -> Row, forward + backward) at mp 1, 2 and 4 on the same
global shapes, and how step time grows with the hidden size at mp 2. On the 2-core CI machine, 4 ranks
oversubscribe the cores: that row measures contention, not speed-up.

Run: .venv/bin/python bench/scaling.py [--device cuda]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from tp_block import with_flags  # noqa: E402

import parallel  # noqa: E402

B = 512
HIDDEN = (256, 512, 1024, 2048)
MODES = {"no flags": (False, False, False), "all three flags": (True, True, True)}


def run(rank, world, device, rounds, hidden_sizes):
    hcg, dtype, dev, timer = harness.setup(rank, world, device)  # bf16 (with fp32 main_grad) on GPUs
    out = {}
    for h in hidden_sizes:
        x = torch.randn(B, h, device=dev, dtype=dtype, requires_grad=True)
        gy = torch.randn(B, h, device=dev, dtype=dtype)
        variants = {}
        for name, flags in MODES.items():
            hh = with_flags(hcg, flags)
            col = parallel.ColumnParallelLinear(h, 4 * h, gather_output=False, hcg=hh, device=dev, dtype=dtype)
            row = parallel.RowParallelLinear(4 * h, h, input_is_parallel=True, hcg=hh, device=dev, dtype=dtype)
            if flags[2]:
                parallel.add_main_grad([*col.parameters(), *row.parameters()])

            def step(col=col, row=row):
                row(F.gelu(col(x))).backward(gy)
                for p in (*col.parameters(), *row.parameters()):
                    p.grad = None
                    if getattr(p, "main_grad", None) is not None:
                        p.main_grad.zero_()

            variants[name] = step
        times = harness.interleaved(variants, timer, rounds)
        out[f"H={h}"] = {n: harness.max_over_ranks(t) * 1e3 for n, t in times.items()}
    return out


def main() -> None:
    args = harness.parse_args(__doc__.split("\n")[0])
    cores = os.cpu_count() or 1
    by_mp = {}
    for mp in (1, 2, 4):
        res = harness.run_ranks(mp, args.device, run, args.rounds, (1024,))
        by_mp[mp] = res["H=1024"]
    rows = []
    for mp, t in by_mp.items():
        note = "oversubscribed: %d ranks on %d cores" % (mp, cores) if args.device == "cpu" and mp > cores else ""
        rows.append([f"mp={mp}", t["no flags"], t["all three flags"], by_mp[1]["no flags"] / t["no flags"], note])
    print(harness.table(f"TP block B={B} H=1024 F=4096, forward + backward (ms/step)",
                        ["degree", "no flags", "all three flags", "speed-up vs mp=1", "note"], rows))
    print()
    sweep = harness.run_ranks(2, args.device, run, args.rounds, HIDDEN)
    rows = [[h, t["no flags"], t["all three flags"]] for h, t in sweep.items()]
    print(harness.table(f"TP block at mp=2, B={B}, F=4H: step time vs hidden size (ms/step)", ["hidden", "no flags", "all three flags"], rows))
    harness.save("scaling", args.device, {"rounds": args.rounds, "by_mp": {str(k): v for k, v in by_mp.items()}, "by_hidden": sweep}, args.json)


if __name__ == "__main__":
    main()
