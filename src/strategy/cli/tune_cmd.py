"""`tune`: the plan checked by trial runs on this machine (or the launcher's), calibrated, the best layout written."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import positive, subparser

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = subparser(
        sub, "tune", "measure the plan's best layouts with short trial runs; write the fastest and a calibration",
        "Probe the device under the launcher, list every layout the plan fits in memory, and run short trials:\n"
        "the fastest predicted and the fastest of each family first, then, after fitting the time model to what was\n"
        "measured, whichever layout the calibrated model still says can beat the best. Each trial is ok, oom,\n"
        "timeout, error or cut (far slower than the best); a hung one's processes are ended. history.jsonl in OUT\n"
        "records every trial: rerun the same command to go on after an interruption. Writes OUT/tune.md (measured\n"
        "against predicted), OUT/best.prototxt and OUT/calibration.json (for `strategy plan --calibration`).",
        "strategy tune --model llama --world-size 2 --seq-len 128 --global-batch 8 --out tune",
    )
    p.add_argument("--model", required=True, help="a small model's type (llama, qwen2, qwen3, qwen3_moe, mixtral: "
                   "the examples' sizes), a Hugging Face directory with config.json, or a config.json")
    p.add_argument("--world-size", type=positive, required=True, metavar="N", help="ranks in all")
    p.add_argument("--seq-len", type=positive, required=True, metavar="S")
    p.add_argument("--global-batch", type=positive, required=True, metavar="SEQUENCES")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="the tune's directory (reused to resume)")
    p.add_argument("--max-trials", type=positive, default=12, metavar="K", help="(default 12)")
    p.add_argument("--budget", type=float, metavar="SECONDS", help="wall-clock seconds at most")
    p.add_argument("--top", type=positive, default=3, metavar="K",
                   help="the fastest predicted layouts on the shortlist, beside each family's fastest (default 3)")
    p.add_argument("--trial-timeout", type=float, default=300.0, metavar="SECONDS", help="(default 300)")
    p.add_argument("--launcher", metavar="COMMAND", help="what starts the ranks, before `-m parallel.tune.trial ...` "
                   "(default: python -m torch.distributed.run --standalone --nproc-per-node=N)")
    p.add_argument("--command", metavar="TEMPLATE", help="your training command instead of the built-in trial: "
                   "{strategy}, {out} and {trial} are filled in; it reads --strategy and logs through parallel.Meter")
    p.add_argument("--gpus-per-node", type=positive, metavar="N", help="(default: the world size, one node)")
    p.add_argument("--max-steps", type=positive, default=20, metavar="K", help="timed steps a trial at most (default 20)")
    p.add_argument("--cut", type=float, default=2.0, metavar="F",
                   help="end a trial whose step is F times the best measured (default 2)")
    p.set_defaults(run=_tune)


def _tune(args: argparse.Namespace) -> int:
    from ..tuning import tune

    try:
        result = tune(args.model, world_size=args.world_size, seq_len=args.seq_len, global_batch=args.global_batch,
                      out=args.out, max_trials=args.max_trials, budget_seconds=args.budget, top=args.top,
                      trial_timeout=args.trial_timeout, launcher=args.launcher, command=args.command,
                      gpus_per_node=args.gpus_per_node, max_steps=args.max_steps, cut=args.cut,
                      progress=lambda line: print(line, flush=True))
    except (OSError, ValueError) as e:
        print(f"strategy tune: {e}", file=sys.stderr)
        return 2
    return 0 if result.best is not None else 1
