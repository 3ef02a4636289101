"""The memory model next to the runtime: for each run of tests/test_plan_memory.py (small Hugging Face Llama, Qwen2 and
Qwen3-MoE models on every axis, with and without recompute and bf16), what strategy.estimate_memory says a rank holds
and what the rank held: parameters, gradients and optimizer state counted from its tensors after one step, and the
activations as the peak of the live tensors saved for backward (saved-tensor hooks; recompute's block inputs and one
recomputed block counted around torch.utils.checkpoint). Every rank; the largest ratio is shown.

Run: .venv/bin/python bench/plan.py
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))
import harness  # noqa: E402

KINDS = ("parameters", "gradients", "optimizer", "activations")


def _label(text: str) -> str:
    """"bf16 mp 2 sp", "recompute pp 2 (2×4 1F1B)": a run's strategy in a few words."""
    words = []
    if "use_pure_bf16" in text:
        words.append("bf16")
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
    import tp_plan_cases as cases
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
            first = out[0]
            rows.append([kind, _label(text),
                         first["estimated"]["activations"] / 1e3, first["measured"]["activations"] / 1e3,
                         *(worst[w] for w in KINDS)])
            results.append({"world": world, "kind": kind, "strategy": text, "ranks": out})
    finally:
        pools.close()
    print(harness.table("estimate_memory next to what each rank held (measured / estimated; the worst rank)",
                        ["model", "strategy", "activ. est. kB", "activ. held kB", "params", "grads", "optim",
                         "activ."], rows,
                        "rank 0's activations in kB; a pipeline clears its gradients inside train_batch (nan: not measured)."))
    harness.save("plan", "cpu", {"runs": results}, args.json)


if __name__ == "__main__":
    main()
