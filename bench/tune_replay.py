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
import math
import random
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import strategy.tuning.tuner as tuner
from strategy.planning.calibration import mape, spearman
from tune import recorded_times  # (bench/tune.py, beside this script)


def ident(c: Any) -> str:
    """A layout by its settings, as bench/tune.py keys its ground truth."""
    return str((tuple(sorted(c.degrees.items())), c.stage, c.recompute, c.micro_batch_size))


def replay(model: str, times: dict[str, list[float]], probe: dict[str, Any], replays: int,
           seed: int, noise: float = 0.0) -> list[dict[str, float]]:
    """Each replay's choice against the best median of the ground truth (`vs_best`, 0.05: 5% slower), and its last
    calibration scored on every layout of the ground truth (`spearman`, `mape`; `mape_uncalibrated`). With `noise`, a
    run is the layout's median × e^N(0, noise), drawn afresh: as many runs as a policy asks for, none recorded twice."""
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

    drawn: dict[str, list[float]] = {}  # a replay's runs of each layout not drawn yet

    def recorded_trial(c: Any, folder: Path, *args: Any, **kwargs: Any) -> dict[str, Any]:
        runs = times.get(ident(c))
        if not runs:
            return {"status": "error", "error": "not in the ground truth", "wall_seconds": 0.0,
                    "estimate_bytes": c.memory.total}
        if noise:
            seconds = truth[ident(c)] * math.exp(rng.gauss(0.0, noise))
            return {"status": "ok", "step_seconds": seconds, "steps": [], "memory_bytes": None,
                    "estimate_bytes": c.memory.total, "wall_seconds": 0.0}
        if not drawn.get(ident(c)):  # a repeat draws another recorded run (a rerun is another measurement)
            drawn[ident(c)] = rng.sample(runs, len(runs))
        return {"status": "ok", "step_seconds": drawn[ident(c)].pop(), "steps": [], "memory_bytes": None,
                "estimate_bytes": c.memory.total, "wall_seconds": 0.0}

    tuner._probe, tuner.run_trial = recorded_probe, recorded_trial  # type: ignore[assignment]
    out = []
    for _ in range(replays):
        drawn.clear()
        with tempfile.TemporaryDirectory() as tmp:
            result = tuner.tune(model, world_size=2, seq_len=128, global_batch=8, out=tmp, progress=None, bar=False)
            scored = [t.candidate for t in result.candidates if ident(t.candidate) in truth]
            measured = [truth[ident(c)] for c in scored]
            predicted = [result.calibration.predict(c.terms) for c in scored]
            out.append({"vs_best": truth[ident(result.best.candidate)] / best - 1 if result.best else float("inf"),
                        "spearman": spearman(predicted, measured), "mape": mape(predicted, measured),
                        "mape_uncalibrated": mape([sum(c.terms.values()) for c in scored], measured)})
    return out


def run_noise(times: dict[str, list[float]]) -> float:
    """The spread of a layout's runs in the ground truth: the standard deviation of their logarithms, pooled over the
    layouts (the runs of one layout sit up to 40 minutes apart: the machine's drift is in it)."""
    spreads = [statistics.variance([math.log(x) for x in runs]) for runs in times.values() if len(runs) > 1]
    return math.sqrt(statistics.mean(spreads))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model")
    p.add_argument("--truth-cache", type=Path, required=True)
    p.add_argument("--probe", type=Path, help="default: TRUTH_CACHE/probe_MODEL.json")
    p.add_argument("--replays", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--collective-seconds", type=float, help="the probe's collective_seconds, for a probe recorded "
                   "before it was measured")
    p.add_argument("--noise", nargs="?", const="recorded", help="draw each run afresh around its layout's median: "
                   "a log-normal spread (0.05: 5%%), or without a figure the ground truth's own (`run_noise`)")
    p.add_argument("--speed-weight", type=float, help="the speed correction's weight (tuner.SPEED_WEIGHT) for the "
                   "ground truth and the tuner alike")
    p.add_argument("--within", type=float, nargs="*", default=[tuner.CONFIRM_WITHIN],
                   help="CONFIRM_WITHIN values to compare")
    p.add_argument("--reserve", type=int, nargs="*", default=[tuner.CONFIRM_RESERVE],
                   help="CONFIRM_RESERVE values to compare")
    args = p.parse_args()
    if args.speed_weight is not None:
        tuner.SPEED_WEIGHT = args.speed_weight
    saved = json.loads((args.truth_cache / f"truth_{args.model}.json").read_text())
    saved["times"] = recorded_times(saved)  # (each run at the tuner's correction)
    probe = json.loads((args.probe or args.truth_cache / f"probe_{args.model}.json").read_text())
    if args.collective_seconds:
        probe["collective_seconds"] = args.collective_seconds
    elif "collective_seconds" not in probe:
        p.error("the probe was recorded before the probe measured a collective's seconds: give --collective-seconds "
                "(what `python -m parallel.tune.probe` measures on this machine now)")
    noise = 0.0
    if args.noise:
        try:
            noise = run_noise(saved["times"]) if args.noise == "recorded" else float(args.noise)
        except ValueError:
            p.error(f"--noise {args.noise!r}: give a spread such as 0.05 (5%), or no figure for the ground truth's own")
        print(f"each run drawn afresh: the layout's median × e^N(0, {noise:.3f})\n")
    print("| close contenders within | trials kept for them | within 5% of the best | mean | worst "
          "| calibrated Spearman, median (worst) | MAPE, median (uncalibrated) |\n|---:|---:|---:|---:|---:|---:|---:|")
    for within in args.within:
        for reserve in args.reserve:
            tuner.CONFIRM_WITHIN, tuner.CONFIRM_RESERVE = within, reserve
            got = replay(args.model, saved["times"], probe, args.replays, args.seed, noise)
            vs = [g["vs_best"] for g in got]
            hits = sum(v <= 0.05 for v in vs)
            rho = [g["spearman"] for g in got]
            print(f"| {within:.0%} | {min(reserve, 12 // 3)} | {hits}/{len(got)} ({hits / len(got):.0%}) "
                  f"| {statistics.mean(vs):+.1%} | {max(vs):+.1%} | {statistics.median(rho):.2f} ({min(rho):.2f}) "
                  f"| {statistics.median(g['mape'] for g in got):.1%} "
                  f"({statistics.median(g['mape_uncalibrated'] for g in got):.1%}) |", flush=True)
    print(fitted_to_all(args.model, saved["times"], probe), flush=True)
    return 0


def fitted_to_all(model: str, times: dict[str, list[float]], probe: dict[str, Any]) -> str:
    """The time model fitted to every layout of the ground truth (the most its terms can tell): its Spearman and MAPE
    there, and the coefficients of the terms the probe measures as a step pays them (1: the probe's figure)."""
    from parallel.tune.models import config_of
    from strategy.planning.calibration import AS_MEASURED, fit
    from strategy.planning.search import plan

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.json"
        path.write_text(json.dumps(config_of(model, 128).to_dict(), default=str))
        cost = tuner.cost_model(probe)
        cands = plan(str(path), gpus=2, gpu_memory=probe["memory_bytes"], seq_len=128, global_batch=8,
                     gpus_per_node=2, top=10 ** 6, cost=cost).candidates
    rows = [(c.terms, statistics.median(times[ident(c)])) for c in cands if times.get(ident(c))]
    c = fit(rows, cost)
    predicted, measured = [c.predict(t) for t, _ in rows], [y for _, y in rows]
    anchored = ", ".join(f"{name} {c.coefficients[name]:.2f}" for name in AS_MEASURED)
    return (f"\nfitted to all {len(rows)} layouts: Spearman {spearman(predicted, measured):.2f}, MAPE "
            f"{mape(predicted, measured):.1%}; {anchored} (the common scale {c.errors['common_scale']:.2f})")


if __name__ == "__main__":
    sys.exit(main())
