"""`strategy tune` against the ground truth: every layout that fits, each measured REPEATS times (interleaved, the
rounds alternating with the tune runs so that drift of the machine hits both alike), all in one run.

For each model: the tuner's choice in each of TUNES runs (fresh directories) is looked up in the ground truth and
compared with the measured best, with the plan's top-1 (its H100 defaults, as `strategy plan` ranks; and with the
probe's constants, uncalibrated), with a grid search in Paddle's auto_tuner order (dp, mp, pp, micro-batch, sharding
degree and stage, recompute; the first layouts up to the same trial budget) and with a random search of the same
budget (the mean of 1,000 draws). Each tune's calibration is scored on every layout: Spearman's rank correlation
of predicted and measured, and the mean absolute percentage error (MAPE), next to the uncalibrated model's (the
summary: the median over the tunes). Every ok trial's measured memory is compared with estimate_memory. Wall time: a
tune against one exhaustive pass.

Run: .venv/bin/python bench/tune.py [--models llama qwen3_moe] [--repeats 3] [--tunes 5]   (about an hour on 2 CPUs)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from strategy.planning.calibration import mape, spearman
from strategy.planning.search import CostModel, plan
from strategy.tuning import launch, tune
from strategy.tuning.tuner import _probe, corrected, cost_model, family, run_trial

ROOT = Path(__file__).resolve().parent
WORLD, SEQ, BATCH, BUDGET = 2, 128, 8, 12


def ident(c) -> tuple:
    """A layout by its settings (the same in every plan of the same model, whatever the probe measured)."""
    return (tuple(sorted(c.degrees.items())), c.stage, c.recompute, c.micro_batch_size)


def label(c) -> str:
    stage = f" stage {c.stage}" if c.degrees["sharding"] > 1 else ""
    return f"{family(c)}{stage}, micro-batch {c.micro_batch_size}×{c.accumulate_steps}, recompute {'on' if c.recompute else 'off'}"


def recorded_times(saved: dict) -> dict[str, list[float]]:
    """A cached ground truth's runs at the tuner's correction now (`corrected`): a cache keeps each run as measured
    (`raw`) and corrected in full (`times`, whose ratio gives the run's reference seconds); an older cache without
    `raw` is as measured."""
    if not (saved.get("raw") and saved.get("reference_seconds")):
        return saved["times"]
    ref = saved["reference_seconds"]
    return {k: [corrected({"step_seconds": r, "reference_seconds": r * ref / c}, ref) or r
                for r, c in zip(saved["raw"][k], saved["times"][k])] for k in saved["raw"]}


def paddle_order(c) -> tuple:
    d = c.degrees
    return (d["dp"], d["mp"], d["pp"], c.micro_batch_size, d["sharding"], c.stage, c.recompute, d["sep"], d["cp"], d["ep"])


def one_model(model: str, repeats: int, tunes: int, work: Path, cache: Path | None = None) -> dict:
    prefix = launch.default_launcher(WORLD)
    env = dict(os.environ)
    probe = _probe(model, SEQ, work / "probe", prefix, env, 300, lambda line: None)
    config = str(work / "probe" / "config.json")
    cands = plan(config, gpus=WORLD, gpu_memory=probe["memory_bytes"], seq_len=SEQ, global_batch=BATCH,
                 gpus_per_node=WORLD, top=10 ** 6, cost=cost_model(probe)).candidates
    times: dict[tuple, list[float]] = {ident(c): [] for c in cands}  # at the probe's speed (`corrected`)
    raw: dict[tuple, list[float]] = {ident(c): [] for c in cands}  # as measured
    memory: dict[tuple, tuple[float, float]] = {}
    pass_seconds: list[float] = []
    runs: list[dict] = []
    per_round = [tunes // repeats + (1 if r < tunes % repeats else 0) for r in range(repeats)]
    cached = cache / f"truth_{model}.json" if cache else None
    if cached and cached.exists():  # an earlier run's ground truth (same machine): only the tunes run now
        saved = json.loads(cached.read_text())
        for c in cands:
            times[ident(c)] = saved["times"].get(str(ident(c)), [])
            raw[ident(c)] = saved.get("raw", {}).get(str(ident(c)), [])
            if str(ident(c)) in saved["memory"]:
                memory[ident(c)] = tuple(saved["memory"][str(ident(c))])
        pass_seconds, repeats, per_round = saved["pass_seconds"], 0, []
        truth_reference = saved.get("reference_seconds")
        for _ in range(tunes):
            start = time.monotonic()
            result = tune(model, world_size=WORLD, seq_len=SEQ, global_batch=BATCH, out=work / f"tune{len(runs)}",
                          max_trials=BUDGET, progress=None, bar=False)
            runs.append({"result": result, "seconds": time.monotonic() - start})
    else:
        truth_reference = probe.get("reference_seconds")
    for r in range(repeats):
        order = cands[r % len(cands):] + cands[:r % len(cands)]  # a different start each round
        start = time.monotonic()
        for k, c in enumerate(order):
            result = run_trial(c, work / "truth" / f"r{r}_{k}", prefix, None, env, number=k + 1, model=Path(config),
                               seq_len=SEQ, global_batch=BATCH, timeout=300)
            if result["status"] == "ok":
                times[ident(c)].append(corrected(result, probe.get("reference_seconds"), weight=1.0))  # (fully: with raw, the run's reference)
                raw[ident(c)].append(result["step_seconds"])
                if result.get("memory_bytes"):
                    memory[ident(c)] = (result["memory_bytes"], result["estimate_bytes"])
            else:
                print(f"  ground truth {label(c)}: {result['status']} {result.get('error', '')[-300:]}", file=sys.stderr)
        pass_seconds.append(time.monotonic() - start)
        print(f"  {model}: ground-truth round {r + 1}/{repeats}: {len(order)} layouts in {pass_seconds[-1]:.0f} s",
              file=sys.stderr, flush=True)
        for i in range(per_round[r]):
            start = time.monotonic()
            result = tune(model, world_size=WORLD, seq_len=SEQ, global_batch=BATCH, out=work / f"tune{len(runs)}",
                          max_trials=BUDGET, progress=None, bar=False)
            runs.append({"result": result, "seconds": time.monotonic() - start})
            print(f"  {model}: tune {len(runs)}/{tunes}: {len(result.trials)} trials, {runs[-1]['seconds']:.0f} s, "
                  f"stopped: {result.stopped}", file=sys.stderr, flush=True)
    if cached and not cached.exists():
        cached.parent.mkdir(parents=True, exist_ok=True)
        (cached.parent / f"probe_{model}.json").write_text(json.dumps(probe))  # (bench/tune_replay.py reads it)
        cached.write_text(json.dumps({"times": {str(k): v for k, v in times.items()}, "pass_seconds": pass_seconds,
                                      "raw": {str(k): v for k, v in raw.items()},
                                      "reference_seconds": probe.get("reference_seconds"),
                                      "memory": {str(k): v for k, v in memory.items()}}))
    # each run at the tuner's correction (the cache keeps them as measured and fully corrected)
    at = recorded_times({"times": {str(k): v for k, v in times.items()}, "raw": {str(k): v for k, v in raw.items()},
                         "reference_seconds": truth_reference})
    times = {k: at.get(str(k), v) for k, v in times.items()}
    truth = {k: statistics.median(v) for k, v in times.items() if v}
    best = min(truth.values())
    by_ident = {ident(c): c for c in cands}

    def measured(c) -> float:
        return truth.get(ident(c), float("nan"))

    h100 = plan(config, gpus=WORLD, gpu_memory=probe["memory_bytes"], seq_len=SEQ, global_batch=BATCH,
                gpus_per_node=WORLD, top=1, cost=CostModel()).candidates[0]
    grid_keys = [ident(c) for c in sorted(cands, key=paddle_order)[:BUDGET] if ident(c) in truth]
    grid = min(truth[k] for k in grid_keys)
    rng = random.Random(0)
    known = [k for k in truth]
    random_best = statistics.mean(min(truth[k] for k in rng.sample(known, min(BUDGET, len(known)))) for _ in range(1000))

    def as_measured(keys: list[tuple]) -> float:
        """What a search that measures each of `keys` once gets: the ground truth of the one its run (one of the
        ground truth's, drawn, as measured: such a search does not correct for the machine's speed) puts first."""
        return truth[min(keys, key=lambda k: rng.choice(raw[k] or times[k]))]  # (a plain search sees raw times)

    grid_measured = statistics.mean(as_measured(grid_keys) for _ in range(1000))
    random_measured = statistics.mean(as_measured(rng.sample(known, min(BUDGET, len(known)))) for _ in range(1000))

    def spread(series: dict[tuple, list[float]]) -> float | None:
        """The median over layouts of (max - min) / median of its runs."""
        s = [(max(v) - min(v)) / statistics.median(v) for v in series.values() if len(v) > 1]
        return statistics.median(s) if s else None
    def scored(i: int) -> dict:
        """Tune i's calibration on every layout of the ground truth (taken at that tune's probe's speed, as its fit
        is), next to its uncalibrated model (the probe's constants)."""
        res = runs[i]["result"]
        terms = {ident(t.candidate): t.candidate.terms for t in res.candidates}
        keys = [k for k in truth if k in terms]
        y = [truth[k] for k in keys]
        tune_reference = json.loads((work / f"tune{i}" / "probe" / "probe.json").read_text()).get("reference_seconds")
        if tune_reference and truth_reference:
            y = [v * tune_reference / truth_reference for v in y]
        calibrated = [res.calibration.predict(terms[k]) for k in keys]
        uncalibrated = [sum(terms[k].values()) for k in keys]
        scale = statistics.median(a / b for a, b in zip(y, uncalibrated))
        return {"spearman_calibrated": spearman(calibrated, y), "spearman_uncalibrated": spearman(uncalibrated, y),
                "mape_calibrated": mape(calibrated, y), "mape_uncalibrated": mape(uncalibrated, y),
                "mape_uncalibrated_scaled": mape([scale * u for u in uncalibrated], y)}

    tuned = []
    for i, run in enumerate(runs):
        res = run["result"]
        chosen = measured(res.best.candidate) if res.best else float("nan")
        tuned.append({"choice": chosen, "vs_best": chosen / best - 1, "trials": len(res.trials), "seconds": run["seconds"],
                      "stopped": res.stopped, "layout": label(res.best.candidate) if res.best else None, **scored(i),
                      "measured": [{"layout": label(t.candidate), "runs": t.samples, "truth": measured(t.candidate)}
                                   for t in res.trials if t.measured]})  # (what each choice was made from)
    # every ok trial's measured memory against estimate_memory: the ground truth's (when measured in this run) and the
    # tunes' trials
    pairs = [] if cached and cached.exists() and repeats == 0 else list(memory.values())
    pairs += [(t.memory_bytes, t.estimate_bytes) for run in runs for t in run["result"].trials
              if t.status == "ok" and t.memory_bytes and t.estimate_bytes]
    mem_errors = [abs(m - e) / m for m, e in pairs]
    exhaustive = statistics.mean(pass_seconds)
    return {
        "model": model, "layouts": len(cands), "measured_layouts": len(truth), "best_seconds": best,
        "best_layout": label(by_ident[min(truth, key=truth.get)]),
        "tunes": tuned,
        "within_5pct": sum(t["vs_best"] <= 0.05 for t in tuned),
        "plan_top1_h100": {"layout": label(h100), "seconds": measured(h100)},
        "plan_top1_probe": {"layout": label(cands[0]), "seconds": measured(cands[0])},
        "grid_paddle_order": grid, "random_search_mean": random_best,
        "grid_paddle_order_as_measured": grid_measured, "random_search_as_measured": random_measured,
        "noise_spread_raw": spread(raw), "noise_spread_corrected": spread(times),
        **{key: statistics.median(t[key] for t in tuned) for key in (  # (the median over the tunes)
            "spearman_calibrated", "spearman_uncalibrated", "mape_calibrated", "mape_uncalibrated",
            "mape_uncalibrated_scaled")},
        "memory_max_error": max(mem_errors) if mem_errors else None,
        "exhaustive_pass_seconds": exhaustive,
        "tune_seconds_mean": statistics.mean(t["seconds"] for t in tuned),
        "tune_share_of_exhaustive": statistics.mean(t["seconds"] for t in tuned) / exhaustive,
        "calibration": runs[-1]["result"].calibration.as_dict(),  # (the last tune's)
    }


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def report(r: dict) -> str:
    worst = max(t["choice"] for t in r["tunes"])
    lines = [f"### {r['model']}: {r['layouts']} layouts fit, ground truth best {r['best_seconds']:.3f} s ({r['best_layout']})",
             "", "| search (budget 12) | measured s/step of its choice | vs best |", "|---|---:|---:|"]
    for i, t in enumerate(r["tunes"], 1):
        lines.append(f"| strategy tune, run {i} ({t['trials']} trials, {t['seconds']:.0f} s; its calibration: Spearman "
                     f"{t['spearman_calibrated']:.2f}, MAPE {t['mape_calibrated']:.1%}): {t['layout']} | "
                     f"{t['choice']:.3f} | {t['vs_best']:+.1%} |")
    for name, value in ((f"plan's top-1, H100 defaults: {r['plan_top1_h100']['layout']}", r["plan_top1_h100"]["seconds"]),
                        (f"plan's top-1, probed constants: {r['plan_top1_probe']['layout']}", r["plan_top1_probe"]["seconds"]),
                        ("grid search in Paddle's order, the best of its 12 by the ground truth", r["grid_paddle_order"]),
                        ("grid search in Paddle's order, chosen by one run each", r["grid_paddle_order_as_measured"]),
                        ("random search, the best of its 12 by the ground truth (mean of 1,000)",
                         r["random_search_mean"]),
                        ("random search, chosen by one run each (mean of 1,000)", r["random_search_as_measured"])):
        lines.append(f"| {name} | {value:.3f} | {value / r['best_seconds'] - 1:+.1%} |")
    lines += ["", f"- tune's choice within 5% of the best in {r['within_5pct']} of {len(r['tunes'])} runs; its worst "
              f"choice {worst:.3f} s against the baselines' {min(r['plan_top1_h100']['seconds'], r['plan_top1_probe']['seconds'], r['grid_paddle_order'], r['random_search_mean']):.3f} s at best",
              f"- calibrated, the median of the tunes' calibrations on all {r['measured_layouts']} layouts: Spearman "
              f"{r['spearman_calibrated']:.2f} (from {min(t['spearman_calibrated'] for t in r['tunes']):.2f} to "
              f"{max(t['spearman_calibrated'] for t in r['tunes']):.2f}) "
              f"(uncalibrated {r['spearman_uncalibrated']:.2f}), MAPE {r['mape_calibrated']:.1%} (uncalibrated "
              f"{r['mape_uncalibrated']:.1%}; with one best common scale {r['mape_uncalibrated_scaled']:.1%})",
              f"- noise: one layout's runs differ by {pct(r['noise_spread_raw'])} at the median as measured, "
              f"{pct(r['noise_spread_corrected'])} corrected to the probe's speed",
              f"- memory: every ok trial within {r['memory_max_error']:.1%} of estimate_memory",
              f"- time: a tune {r['tune_seconds_mean']:.0f} s, one exhaustive pass {r['exhaustive_pass_seconds']:.0f} s "
              f"({r['tune_share_of_exhaustive']:.0%})"]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", default=["llama", "qwen3_moe"])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--tunes", type=int, default=5)
    p.add_argument("--json", type=Path, default=ROOT / "results" / "tune.json")
    p.add_argument("--truth-cache", type=Path, help="keep the ground truth here, and reuse it when it is there")
    args = p.parse_args()
    from strategy.atomic import write_atomic

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models:
            results.append(one_model(model, args.repeats, args.tunes, Path(tmp) / model, args.truth_cache))
            print(report(results[-1]), flush=True)
            write_atomic(args.json, (json.dumps({"world_size": WORLD, "seq_len": SEQ, "global_batch": BATCH,
                                                 "budget": BUDGET, "repeats": args.repeats, "results": results},
                                                indent=1, default=str) + "\n").encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
