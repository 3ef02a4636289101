"""Gathering a sharded model's full state (parallel.full_state_dict, and what checkpoints place): each tensor as a
DTensor on the axes of degree > 1 (what parallel does) next to the same tensor on the whole six-axis hybrid mesh,
size-1 dims included (what it did). torch's redistribution planner searches states over every mesh dim for FSDP2's
layouts, and each new layout is planned once (its cache is cleared before each round, as in a fresh process).

Run: .venv/bin/python bench/state_mesh.py
"""

from __future__ import annotations

import importlib
import statistics
import sys
import time
from pathlib import Path

import torch.distributed as dist
from torch.distributed.tensor import DTensor, Replicate
from torch.distributed.tensor import _redistribute

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import harness  # noqa: E402

import parallel  # noqa: E402
import strategy  # noqa: E402
from parallel.checkpoint.save_load import _model_state  # noqa: E402

ROUNDS = 3
LAYOUTS = {  # name -> (ranks, strategy text)
    "sharding 2, stage 3": (2, "hybrid_configs { sharding_degree: 2 sharding_configs { stage: 3 } }"),
    "mp 2 x sharding 2, stage 3": (4, "hybrid_configs { mp_degree: 2 sharding_degree: 2 sharding_configs { stage: 3 } }"),
}


def _on_whole_mesh(d: DTensor, hcg) -> DTensor:
    """The same local shard and global shape, placed on the whole hybrid mesh (Replicate on every other dim)."""
    whole = tuple(hcg.mesh.mesh_dim_names)
    placements = [Replicate()] * len(whole)
    for name, p in zip(d.device_mesh.mesh_dim_names, d.placements):
        placements[whole.index(name)] = p
    return DTensor.from_local(d.to_local(), hcg.mesh, placements, run_check=False, shape=d.shape, stride=d.stride())


def run(rank, world, device, text):
    hcg = parallel.init(strategy.loads(text))
    gpt = importlib.import_module("train_gpt")
    cfg = gpt.Config(d_model=128, layers=4, heads=4, seq_len=32, batch_size=8, steps=1)
    model, opt = gpt.build(cfg, hcg)
    ids, targets = gpt.batch(gpt.corpus(), 0, cfg, hcg)
    model(ids, targets).backward()  # a step, as before a checkpoint: FSDP2 holds its sharded parameters again
    opt.step()
    opt.zero_grad()
    state = _model_state(model, hcg)
    variants = {"state mesh": lambda: state, "whole mesh": lambda: {k: _on_whole_mesh(v, hcg) for k, v in state.items()}}
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(ROUNDS):
        for name, placed in variants.items():
            _redistribute._gen_transform_infos.cache_clear()  # every layout planned anew, as in a new process
            tensors = placed()
            dist.barrier()
            t0 = time.perf_counter()
            for t in tensors.values():
                t.full_tensor()
            times[name].append(harness.max_over_ranks(time.perf_counter() - t0))
    return {"tensors": len(state), "mesh": list(next(iter(state.values())).device_mesh.mesh_dim_names),
            **{name: statistics.median(v) for name, v in times.items()}}


def main() -> None:
    args = harness.parse_args(__doc__.split("\n")[0])
    rows, results = [], {}
    for name, (world, text) in LAYOUTS.items():
        results[name] = r = harness.run_ranks(world, "cpu", run, text)
        rows.append([name, r["tensors"], " x ".join(r["mesh"]), r["state mesh"], r["whole mesh"],
                     r["whole mesh"] / r["state mesh"]])
    print(harness.table(f"full_tensor() of every model state tensor, demo GPT d=128 layers=4 (median of {ROUNDS})",
                        ["layout", "tensors", "state mesh", "state mesh s", "whole mesh s", "whole / state"], rows,
                        "whole mesh: the same tensors on dp x pp x sharding x sep x cp x mp, size-1 dims included."))
    harness.save("state_mesh", "cpu", {"results": results}, args.json)


if __name__ == "__main__":
    main()
