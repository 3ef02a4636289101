"""Replay `strategy tune`'s policy against a recorded ground truth, many times, in seconds: each trial draws one of
the runs the ground truth recorded of its layout, so a policy (the shortlist, the stop rule, how many close contenders
run again) is scored by how often its choice lands within 5% of the best, without the hour a real bench takes.

The ground truth is a file `bench/tune.py --truth-cache DIR` wrote (DIR/truth_MODEL.json: each layout's runs), the
probe a probe.json of the same model on the same machine (DIR/probe_MODEL.json, or --probe). No process is launched:
the probe and the trial runner are replaced by the recordings.

Run: .venv/bin/python bench/tune_replay.py llama --truth-cache /tmp/tunecache [--replays 100]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import strategy.tuning.tuner as tuner
from tune import recorded_times  # (bench/tune.py, beside this script)


def ident(c: Any) -> str:
    """A layout by its settings, as bench/tune.py keys its ground truth."""
    return str((tuple(sorted(c.degrees.items())), c.stage, c.recompute, c.micro_batch_size))


def replay(model: str, times: dict[str, list[float]], probe: dict[str, Any], replays: int, seed: int) -> list[float]:
    """Each replay's choice against the best median of the ground truth (0.05: 5% slower)."""
    from parallel.tune.models import config_of

    truth = {k: statistics.median(v) for k, v in times.items() if v}
    best = min(truth.values())
    config = config_of(model, 128).to_dict()
    rng = random.Random(seed)
    probe = {k: v for k, v in probe.items() if k != "reference_seconds"}  # (the recorded runs are corrected already)

    def recorded_probe(model: Any, seq_len: int, folder: Path, *args: Any) -> dict[str, Any]:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(config, default=str))
        return probe

    def recorded_trial(c: Any, folder: Path, *args: Any, **kwargs: Any) -> dict[str, Any]:
        runs = times.get(ident(c))
        if not runs:
            return {"status": "error", "error": "not in the ground truth", "wall_seconds": 0.0,
                    "estimate_bytes": c.memory.total}
        return {"status": "ok", "step_seconds": rng.choice(runs), "steps": [], "memory_bytes": None,
                "estimate_bytes": c.memory.total, "wall_seconds": 0.0}

    tuner._probe, tuner.run_trial = recorded_probe, recorded_trial  # type: ignore[assignment]
    out = []
    for _ in range(replays):
        with tempfile.TemporaryDirectory() as tmp:
            result = tuner.tune(model, world_size=2, seq_len=128, global_batch=8, out=tmp, progress=None, bar=False)
            out.append(truth[ident(result.best.candidate)] / best - 1 if result.best else float("inf"))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model")
    p.add_argument("--truth-cache", type=Path, required=True)
    p.add_argument("--probe", type=Path, help="default: TRUTH_CACHE/probe_MODEL.json")
    p.add_argument("--replays", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--within", type=float, nargs="*", default=[tuner.CONFIRM_WITHIN],
                   help="CONFIRM_WITHIN values to compare")
    p.add_argument("--reserve", type=int, nargs="*", default=[tuner.CONFIRM_RESERVE],
                   help="CONFIRM_RESERVE values to compare")
    args = p.parse_args()
    saved = json.loads((args.truth_cache / f"truth_{args.model}.json").read_text())
    saved["times"] = recorded_times(saved)  # (each run at the tuner's correction)
    probe = json.loads((args.probe or args.truth_cache / f"probe_{args.model}.json").read_text())
    print("| close contenders within | trials kept for them | within 5% of the best | mean | worst |\n"
          "|---:|---:|---:|---:|---:|")
    for within in args.within:
        for reserve in args.reserve:
            tuner.CONFIRM_WITHIN, tuner.CONFIRM_RESERVE = within, reserve
            got = replay(args.model, saved["times"], probe, args.replays, args.seed)
            hits = sum(g <= 0.05 for g in got)
            print(f"| {within:.0%} | {min(reserve, 12 // 3)} | {hits}/{len(got)} ({hits / len(got):.0%}) | {statistics.mean(got):+.1%} "
                  f"| {max(got):+.1%} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
