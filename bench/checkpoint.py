"""Checkpoint cost: parallel.save / parallel.load (DCP) of the demo GPT (scaled up) with its AdamW state at mp 1, 2
and 4, next to a plain torch.save / torch.load of the same full state on one process. Time, bytes on disk, MB/s.

Run: .venv/bin/python bench/checkpoint.py
"""

from __future__ import annotations

import importlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import harness  # noqa: E402

import parallel  # noqa: E402

REPEATS = 5


def _model(hcg):
    gpt = importlib.import_module("train_gpt")
    cfg = gpt.Config(d_model=512, layers=6, heads=8, seq_len=64, batch_size=8, steps=1)
    model, opt = gpt.build(cfg, hcg)
    ids, targets = gpt.batch(gpt.corpus(), 0, cfg, hcg)
    model(ids, targets).backward()
    opt.step()  # AdamW state exists
    opt.zero_grad()
    return model, opt


def _bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def run(rank, world, device, root):
    hcg, _, _, _ = harness.setup(rank, world, device)
    model, opt = _model(hcg)
    path = Path(root) / f"mp{world}"
    saves, loads = [], []
    for _ in range(REPEATS):
        dist.barrier()
        t0 = time.perf_counter()
        parallel.save(path, model, opt, step=1)
        saves.append(harness.max_over_ranks(time.perf_counter() - t0))
        dist.barrier()
        t0 = time.perf_counter()
        parallel.load(path, model, opt)
        loads.append(harness.max_over_ranks(time.perf_counter() - t0))
    size = _bytes(path)
    baseline = None
    if world == 1:  # the same full state, one process, plain torch.save / torch.load
        state = {"model": model.state_dict(), "optimizer": opt.state_dict()}
        file = Path(root) / "plain.pt"
        t_save, t_load = [], []
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            torch.save(state, file)
            t_save.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            torch.load(file, weights_only=True)
            t_load.append(time.perf_counter() - t0)
        baseline = {"save": statistics.median(t_save), "load": statistics.median(t_load), "bytes": file.stat().st_size}
    return {"save": statistics.median(saves), "load": statistics.median(loads), "bytes": size, "baseline": baseline}


def main() -> None:
    args = harness.parse_args(__doc__.split("\n")[0])
    rows, results = [], {}
    root = Path(tempfile.mkdtemp(prefix="ckpt-bench-"))
    try:
        for world in (1, 2, 4):
            results[world] = r = harness.run_ranks(world, "cpu", run, str(root))
            mb = r["bytes"] / 1e6
            if r["baseline"]:
                b = r["baseline"]
                rows.append(["torch.save / torch.load (1 process)", b["bytes"] / 1e6, b["save"] * 1e3, b["bytes"] / 1e6 / b["save"],
                             b["load"] * 1e3, b["bytes"] / 1e6 / b["load"]])
            rows.append([f"parallel.save / load, mp={world}", mb, r["save"] * 1e3, mb / r["save"], r["load"] * 1e3, mb / r["load"]])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(harness.table("demo GPT d=512 layers=6 with AdamW state: save and load (median of 5)",
                        ["variant", "MB on disk", "save ms", "save MB/s", "load ms", "load MB/s"], rows,
                        "mp=4 runs 4 ranks on this machine's cores; DCP writes one file per rank."))
    harness.save("checkpoint", "cpu", {"results": {str(k): v for k, v in results.items()}}, args.json)


if __name__ == "__main__":
    main()
