"""Checkpoint cost: parallel.save / parallel.load (DCP) of the demo GPT (scaled up) with its AdamW state at mp 1, 2
and 4, next to a plain torch.save / torch.load of the same full state on one process. Time, bytes on disk, MB/s.
Then the training step while a checkpoint is taken, at mp 2: no save, a save in the foreground (sync), and one in the
background (parallel.Checkpointer with async_save), each round interleaved.

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
ROUNDS = 5


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


def during_saves(rank, world, device, root):
    """Step times: without a save, a step followed by a sync save, and with an async save the copy it makes before
    returning and every step that runs while the write is in flight (median over rounds, slowest rank)."""
    import strategy

    hcg, _, _, _ = harness.setup(rank, world, device)
    gpt = importlib.import_module("train_gpt")
    # Small batches of a large model: a step is short next to writing its state (the sync save costs several steps).
    cfg = gpt.Config(d_model=512, layers=6, heads=8, seq_len=32, batch_size=2, steps=1)
    model, opt = gpt.build(cfg, hcg)
    data, i = gpt.corpus(), 0

    def step() -> float:
        nonlocal i
        dist.barrier()
        t0 = time.perf_counter()
        ids, targets = gpt.batch(data, i, cfg, hcg)
        model(ids, targets).backward()
        opt.step()
        opt.zero_grad()
        i += 1
        return time.perf_counter() - t0

    ckpts = {mode: parallel.Checkpointer(hcg, settings=strategy.CheckpointSettings(
        dir=str(Path(root) / mode), keep_last=1, async_save=mode == "async")) for mode in ("sync", "async")}
    for c in ckpts.values():
        c.start(model, opt)
    for _ in range(3):
        step()
    plain, sync, copy, inflight, overlapped = [], [], [], [], []
    for _ in range(ROUNDS):
        plain += [step() for _ in range(3)]
        t = step()
        t0 = time.perf_counter()
        ckpts["sync"].save(i)
        sync.append(t + time.perf_counter() - t0)
        step()
        t0 = time.perf_counter()
        ckpts["async"].save(i)
        copy.append(time.perf_counter() - t0)
        n = 0
        while True:  # the same number of steps on every rank: they agree each time whether any is still writing
            busy = torch.tensor(float(ckpts["async"].saving))
            dist.all_reduce(busy, op=dist.ReduceOp.MAX)
            if not busy:
                break
            inflight.append(step())
            n += 1
        overlapped.append(n)
        ckpts["async"].wait()
    for c in ckpts.values():
        c.close()
    med = lambda xs: harness.max_over_ranks(statistics.median(xs)) if xs else float("nan")  # noqa: E731
    return {"plain": med(plain), "sync": med(sync), "copy": med(copy), "inflight": med(inflight),
            "overlapped": statistics.median(overlapped), "bytes": _bytes(Path(root) / "sync")}


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
    for world in (1, 2):
        root = Path(tempfile.mkdtemp(prefix="ckpt-bench-"))
        try:
            d = harness.run_ranks(world, "cpu", during_saves, str(root))
        finally:
            shutil.rmtree(root, ignore_errors=True)
        plain = d["plain"]
        rows = [["no save", plain * 1e3, 1.0],
                ["sync: the step and its save", d["sync"] * 1e3, d["sync"] / plain],
                ["async: the save call (copies the state)", d["copy"] * 1e3, d["copy"] / plain],
                ["async: a step while the write runs", d["inflight"] * 1e3, d["inflight"] / plain]]
        print(harness.table(f"training step while a checkpoint is taken, mp={world}, {d['bytes'] / 1e6:.0f} MB per "
                            f"checkpoint (median of {ROUNDS} rounds)", ["variant", "ms", "x a step without a save"], rows,
                            f"async: {d['overlapped']:.0f} steps ran while each write was in flight (median); the sync "
                            f"save costs {(d['sync'] - plain) / plain:.1f} steps."))
        results[f"during_saves_mp{world}"] = d
    harness.save("checkpoint", "cpu", {"results": {str(k): v for k, v in results.items()}}, args.json)


if __name__ == "__main__":
    main()
