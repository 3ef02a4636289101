"""The memory model next to the runtime: for each run of tests/strategy/planning/test_plan_memory.py (small Hugging Face Llama, Qwen2 and
Qwen3-MoE models on every axis, with and without recompute and bf16), what strategy.estimate_memory says a rank holds
and what the rank held: parameters, gradients and optimizer state counted from its tensors after one step, and the
activations as the peak of the live tensors saved for backward (saved-tensor hooks holding what they pack detached,
each storage once; under recompute, what the hooks hold when the backward recomputes a block plus that block's saved
tensors). Every rank; the largest ratio is shown, and a row per stage for pipelines. Then, under pure bf16, the
activations with and without cast_for_amp's cast of a norm's output to its input's dtype.

Run: .venv/bin/python bench/plan.py
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "strategy" / "planning"))  # the memory cases and their runs
import harness  # noqa: E402

KINDS = ("parameters", "gradients", "optimizer", "activations")


def _label(text: str) -> str:
    """"bf16 mp 2 sp", "recompute pp 2 (2×4 1F1B)": a run's strategy in a few words."""
    words = []
    if "use_pure_bf16" in text:
        words.append("bf16")
    elif "amp: true" in text:
        words.append("autocast bf16")
    if "recompute: true" in text:
        words.append("recompute")
    for axis in ("dp", "mp", "pp", "sharding", "sep", "cp", "ep", "moe_sharding"):
        found = re.search(rf"\b{axis}_degree: (\d+)", text)
        if found and found.group(1) != "1":
            words.append(f"{axis} {found.group(1)}")
    if "stage: " in text:
        words.append(f"stage {text.split('stage: ')[1].split()[0]}")
    if "sequence_parallel: true" in text:
        words.append("sp")
    if "accumulate_steps" in text:
        words.append("(2 × 4 micro-batches, 1F1B)")
    return " ".join(words) or "one process"


def main() -> None:
    from distributed import Pools
    import plan_memory_cases as cases
    from test_plan_memory import RUNS

    args = harness.parse_args(__doc__.split("\n")[0])
    rows, results = [], []
    pools = Pools()
    try:
        for world, kind, text in RUNS:
            out = pools(world).run(cases.measure, kind, text, timeout=180)
            worst = {}
            for what in KINDS:
                ratios = [o["measured"][what] / o["estimated"][what] for o in out
                          if o["estimated"][what] and o["measured"][what]]
                worst[what] = max(ratios, key=lambda r: abs(r - 1)) if ratios else float("nan")
            stages = [(f" stage {r}", [o]) for r, o in enumerate(out)] if "pp_degree" in text else [("", out)]
            for suffix, ranks in stages:
                if suffix:
                    worst["activations"] = ranks[0]["measured"]["activations"] / ranks[0]["estimated"]["activations"]
                rows.append([kind, _label(text) + suffix,
                             ranks[0]["estimated"]["activations"] / 1e3, ranks[0]["measured"]["activations"] / 1e3,
                             *(worst[w] for w in KINDS)])
            results.append({"world": world, "kind": kind, "strategy": text, "ranks": out})
        casts = []
        for world, kind, text in (r for r in RUNS if "use_pure_bf16" in r[2]):
            without = pools(world).run(cases.measure, kind, text, norm_cast=False, timeout=180)[0]
            held = next(res for res in results if res["strategy"] == text and res["kind"] == kind)["ranks"][0]
            casts.append([kind, _label(text), without["measured"]["activations"] / 1e3,
                          held["measured"]["activations"] / 1e3,
                          held["measured"]["activations"] / without["measured"]["activations"]])
    finally:
        pools.close()
    print(harness.table("estimate_memory next to what each rank held (measured / estimated; the worst rank)",
                        ["model", "strategy", "activ. est. kB", "activ. held kB", "params", "grads", "optim",
                         "activ."], rows,
                        "rank 0's activations in kB; a pipeline clears its gradients inside train_batch (nan: not measured)."))
    print()
    print(harness.table("pure bf16: activations held without and with the norms' output cast to their input's dtype",
                        ["model", "strategy", "without kB", "with kB", "with / without"], casts,
                        "rank 0; without it an fp32 norm's output is cast by autocast once for every layer reading it."))
    harness.save("plan", "cpu", {"runs": results, "norm_cast": casts}, args.json)


if __name__ == "__main__":
    main()
