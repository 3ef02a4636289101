"""How many timed steps a `strategy tune` trial needs: two close layouts of the examples' Llama (dp 2 at micro-batch
4×1 and 2×2, world 2, seq 128, global batch 8), RUNS interleaved runs each of 20 timed steps (the trial runner's own,
a fresh torchrun each), then each run cut to its first n steps: how far the runs' medians spread (σ of their
logarithms, at the probe's speed as the tuner corrects them) and how often one run of each puts the two layouts in the
wrong order. A run's noise is mostly its steps' (their median over five steps moves a lot), not the run's: this is
why a trial times steps until its median's standard error is within ±3% (`parallel.tune.trial._stable`).

The same recordings say how much of the probe's speed correction to apply (`tuner.SPEED_WEIGHT`): each run's median at
each weight, and with --truths each ground truth's runs.

Run: .venv/bin/python bench/trial_steps.py [--runs 8] [--json bench/results/trial_steps.json]   (about 4 minutes)
     .venv/bin/python bench/trial_steps.py --from bench/results/trial_steps*.json [--truths DIR/truth_llama.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
from pathlib import Path

from strategy.planning.search import plan
from strategy.tuning import launch
from strategy.tuning.tuner import SPEED_WEIGHT, _probe, corrected, cost_model, run_trial
from tune import SEQ, BATCH, WORLD, label  # (bench/tune.py, beside this script)
from tune_replay import run_noise

LAYOUTS = ("dp2, micro-batch 4×1, recompute off", "dp2, micro-batch 2×2, recompute off")
STEPS = 20


def measure(runs: int, work: Path) -> dict:
    """Each layout's runs: every timed step and the reference workload's median (the machine's speed)."""
    prefix, env = launch.default_launcher(WORLD), dict(os.environ)
    probe = _probe("llama", SEQ, work / "probe", prefix, env, 300, lambda line: None)
    config = work / "probe" / "config.json"
    cands = plan(str(config), gpus=WORLD, gpu_memory=probe["memory_bytes"], seq_len=SEQ, global_batch=BATCH,
                 gpus_per_node=WORLD, top=10 ** 6, cost=cost_model(probe)).candidates
    chosen = [c for name in LAYOUTS for c in cands if label(c) == name]
    out: dict[str, list[dict]] = {label(c): [] for c in chosen}
    for r in range(runs):
        for k, c in enumerate(chosen):
            res = run_trial(c, work / f"run{r}_{k}", prefix, None, env, number=1, model=config, seq_len=SEQ,
                            global_batch=BATCH, timeout=300, max_steps=STEPS, tolerance=-1.0,  # (never stable: all 20)
                            reference=probe.get("reference_seconds"))
            if res["status"] != "ok":
                raise SystemExit(f"{label(c)}: {res['status']} {res.get('error', '')[-500:]}")
            out[label(c)].append({"steps": res["steps"], "reference_seconds": res["reference_seconds"],
                                  "references": res.get("references"), "wall_seconds": res["wall_seconds"]})
            print(f"  {label(c)}: run {r + 1}/{runs}, {res['wall_seconds']:.1f} s", file=sys.stderr, flush=True)
    return {"probe_reference_seconds": probe.get("reference_seconds"), "runs": out}


WEIGHTS = (0.0, 0.5, 0.75, 1.0)  # the speed correction's weight: as measured, half, three quarters, fully


def report(recorded: dict) -> str:
    """The tables of one recording: for the first n timed steps of each run (at the tuner's SPEED_WEIGHT), and for
    each weight of the speed correction (all 20 steps), each layout's spread and the chance of a wrong order."""
    ref = recorded["probe_reference_seconds"]

    def medians(runs: list[dict], n: int, weight: float = SPEED_WEIGHT) -> list[float]:
        return [corrected({"step_seconds": statistics.median(r["steps"][:n]), "reference_seconds":
                           r["reference_seconds"]}, ref, weight=weight) or 0.0 for r in runs]

    def row(first: str, a: list[float], b: list[float]) -> str:
        wrong = sum(x > y for x in a for y in b) / (len(a) * len(b))
        sigma = [statistics.stdev(math.log(x) for x in m) for m in (a, b)]
        return f"| {first} | {sigma[0]:.1%} | {sigma[1]:.1%} | {wrong:.0%} |"

    (fast, fast_runs), (slow, slow_runs) = recorded["runs"].items()
    head = f" | σ of a run's median: {fast} | σ: {slow} | one run each puts them in the wrong order |\n|---:|---:|---:|---:|"
    lines = [f"| timed steps (correction ^{SPEED_WEIGHT:g}){head}"]
    lines += [row(str(n), medians(fast_runs, n), medians(slow_runs, n)) for n in (5, 8, 10, 12, 16, 20)]
    lines += ["", f"| speed correction ({STEPS} steps){head}"]
    lines += [row(f"^{w:g}", medians(fast_runs, STEPS, w), medians(slow_runs, STEPS, w)) for w in WEIGHTS]
    within = statistics.mean(statistics.stdev(math.log(x) for x in r["steps"]) for r in fast_runs + slow_runs)
    gap = statistics.median(medians(slow_runs, STEPS)) / statistics.median(medians(fast_runs, STEPS)) - 1
    walls = [r["wall_seconds"] for r in fast_runs + slow_runs]
    speeds = [ref / r["reference_seconds"] for r in fast_runs + slow_runs]
    return "\n".join([*lines, "", f"- {recorded.get('measured', 'measured now')}: {len(fast_runs)} runs of each; the "
                      f"second layout {gap:+.1%} at the median of all its steps; one step's spread within a run σ "
                      f"{within:.1%}; the machine's speed from {min(speeds):.2f} to {max(speeds):.2f} of the probe's; "
                      f"a run of {STEPS} steps took {statistics.median(walls):.1f} s (median)"])


def truth_spread(path: Path) -> str:
    """A ground truth of bench/tune.py --truth-cache (each run as measured and fully corrected): the pooled σ of a
    layout's runs at each weight of the speed correction."""
    saved = json.loads(path.read_text())
    cells = []
    for w in WEIGHTS:  # (a fully corrected run c of a measured r had the reference r / c of the probe's, `recorded_times`)
        runs = {k: [corrected({"step_seconds": r, "reference_seconds": r / c}, 1.0, weight=w) or r
                    for r, c in zip(saved["raw"][k], saved["times"][k])] for k in saved["raw"]}
        cells.append(f"{run_noise(runs):.1%}")
    return f"| {path} | " + " | ".join(cells) + " |"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=8)
    p.add_argument("--json", type=Path, help="write the recorded steps here")
    p.add_argument("--from", dest="recorded", type=Path, nargs="+", help="report recorded runs instead of measuring")
    p.add_argument("--truths", type=Path, nargs="+", default=[], help="also each ground truth's spread by weight "
                   "(bench/tune.py --truth-cache DIR: DIR/truth_MODEL.json)")
    args = p.parse_args()
    missing = [str(path) for path in (args.recorded or []) + args.truths if not path.is_file()]
    if missing:
        p.error(f"no such file: {', '.join(missing)} (--from takes this script's --json files, --truths "
                "bench/tune.py --truth-cache DIR's truth_MODEL.json)")
    if args.recorded:
        recordings = [json.loads(path.read_text()) for path in args.recorded]
    else:
        with tempfile.TemporaryDirectory() as tmp:
            recordings = [measure(args.runs, Path(tmp))]
        if args.json:
            args.json.write_text(json.dumps(recordings[0], indent=1) + "\n")
    print("\n\n".join(report(r) for r in recordings))
    if args.truths:
        print("\n| ground truth | pooled σ of a layout's runs: as measured | ^0.5 | ^0.75 | fully corrected |\n"
              "|---|---:|---:|---:|---:|")
        print("\n".join(truth_spread(path) for path in args.truths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
