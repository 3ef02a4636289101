"""amp and recompute on the demo GPT at mp 2: activations kept for the backward and step time with recompute off
and on, and step time in fp32, bf16 autocast and fp16 autocast with loss scaling, side by side in one run.

Run: .venv/bin/python bench/training_options.py
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import harness  # noqa: E402

import parallel  # noqa: E402
import strategy  # noqa: E402

VARIANTS = {
    "fp32": "",
    "fp32 + recompute (blocks)": 'recompute: true recompute_configs { checkpoints: "blocks.*" }',
    "bf16 autocast": 'amp: true amp_configs { dtype: "bfloat16" }',
    "fp16 autocast + loss scaling": "amp: true",
}


def variant(rank, world, text: str):
    import dataclasses

    gpt = importlib.import_module("train_gpt")
    s = strategy.loads(f"hybrid_configs {{ mp_degree: {world} }} {text}")
    base = parallel.current()
    hcg = dataclasses.replace(base, resolved=strategy.resolve(s, world_size=world))
    cfg = gpt.Config(d_model=256, layers=4, heads=8, seq_len=128, batch_size=16, steps=1)
    model, opt = gpt.build(cfg, hcg)
    parallel.apply_recompute(model, hcg=hcg)
    ids, targets = gpt.batch(gpt.corpus(), 0, cfg, hcg)

    def step():
        with parallel.autocast(hcg=hcg):
            loss = model(ids, targets)
        opt.scale(loss).backward()
        opt.step()
        opt.zero_grad()

    def saved_mib() -> float:
        storages: dict[int, int] = {}

        def pack(t):
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), parallel.autocast(hcg=hcg):
            out = model(ids, targets)
        del out
        return sum(storages.values()) / 2**20
    return step, saved_mib


def run(rank, world, device, rounds):
    _, _, _, timer = harness.setup(rank, world, device)
    built = {name: variant(rank, world, text) for name, text in VARIANTS.items()}
    memory = {name: harness.max_over_ranks(saved()) for name, (_, saved) in built.items()}
    times = harness.interleaved({name: step for name, (step, _) in built.items()}, timer, rounds)
    return {"memory_mib": memory, "seconds": {k: harness.max_over_ranks(v) for k, v in times.items()}}


def main() -> None:
    args = harness.parse_args(__doc__.split("\n")[0])
    r = harness.run_ranks(2, "cpu", run, args.rounds)
    base_m, base_t = r["memory_mib"]["fp32"], r["seconds"]["fp32"]
    rows = [[name, r["memory_mib"][name], r["memory_mib"][name] / base_m, r["seconds"][name] * 1e3, r["seconds"][name] / base_t]
            for name in VARIANTS]
    print(harness.table("demo GPT d=256 layers=4 seq=128 batch=16, mp=2: activations kept for backward and step time",
                        ["variant", "saved MiB/rank", "vs fp32", "ms/step", "vs fp32"], rows))
    harness.save("training_options", "cpu", {"rounds": args.rounds, **r}, args.json)


if __name__ == "__main__":
    main()
